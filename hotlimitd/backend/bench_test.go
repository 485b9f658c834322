package backend

import (
	"context"
	"os"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/redislimit"
)

// BenchmarkLocal compares a decision of three layers with states on a
// Local Store (a set of limits Update can replace) with the same decision
// on admission.Local (a fixed set): the price of following reloads.
func BenchmarkLocal(b *testing.B) {
	limits := map[string]hotlimit.Policy{"a": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1e9), Burst: 1e9}, "b": frozen(20000), "c": frozen(20000)}
	layers := []admission.Layer{{Limit: "a", Key: "k", Cost: 1}, {Limit: "b", Key: "k", Cost: 0}, {Limit: "c", Key: "j", Cost: 0}}
	s, err := Open(context.Background(), Options{}, limits)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	l, err := admission.LocalBackend()(limits)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		name string
		b    admission.Backend
	}{{"store", s}, {"admission.Local", l}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			states := make([]hotlimit.LayerState, len(layers))
			ctx := context.Background()
			for b.Loop() {
				c.b.AllowStates(ctx, layers, states)
			}
		})
	}
}

// BenchmarkLease compares a Lease Store's decision (one layer, on this
// replica's lease) with a redislimit.RedisBackend in lease mode
// (WithLeases) on the same Redis: the
// price of following reloads (a read lock per decision) on the path that
// must stay in-process fast.
func BenchmarkLease(b *testing.B) {
	addr := os.Getenv(redistest.AddrEnv)
	if addr == "" {
		b.Skipf("%s is not set: run hotlimitd/test.sh", redistest.AddrEnv)
	}
	limits := map[string]hotlimit.Policy{"a": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1e8), Burst: 1e6}}
	layers := []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}
	s, err := Open(context.Background(), Options{Kind: Lease, RedisAddrs: []string{addr}, Prefix: redistest.Prefix(b), MaxLease: 1e5}, limits)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := redistest.Client(b, addr)
	l, err := redislimit.NewBackend(c, limits, redislimit.WithPrefix(redistest.Prefix(b)), redislimit.WithLeases(1e5, 0))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		name string
		b    admission.Backend
	}{{"store", s}, {"redislimit.RedisBackend", l}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				states := make([]hotlimit.LayerState, len(layers))
				for pb.Next() {
					c.b.AllowStates(context.Background(), layers, states)
				}
			})
		})
	}
}
