package backend

import (
	"context"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
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
	defer s.Close(context.Background())
	l, err := admission.NewLocal(limits)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		name string
		b    admission.StateBackend
	}{{"store", s}, {"admission.Local", l}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			states := make([]admission.LayerState, len(layers))
			ctx := context.Background()
			for b.Loop() {
				c.b.AllowStates(ctx, layers, states)
			}
		})
	}
}
