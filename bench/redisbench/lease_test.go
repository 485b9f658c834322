package redisbench

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// ample admits every decision of a benchmark: the comparison is of
// admitting decisions, where the lease spends and the others write.
var ample = hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1_000_000, Per: time.Second}, Burst: 1 << 40}

// leased returns a redislimit.Limiter in lease mode, of up to maxLease
// units per key (0: the default).
func leased(b *testing.B, c *redis.Client, maxLease int64) *redislimit.Limiter {
	l, err := redislimit.New(c, "b", ample, redislimit.WithPrefix(prefix(b)), redislimit.WithTimeout(time.Second), redislimit.WithLeases(maxLease, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	return l
}

// BenchmarkLease: one hot key, every decision admitted, serially and in
// parallel: the in-process hotlimit.Limiter, a redislimit.Limiter in lease
// mode (leases of up to 2^20 units, so that round trips are rare) and redislimit's
// synchronous Limiter (one round trip per decision).
func BenchmarkLease(b *testing.B) {
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("local/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			l, err := hotlimit.New(ample)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			run(b, c, n, mode.parallel, true, func(_ context.Context, key string) bool {
				return l.Allow(key).Allowed
			})
		})
		b.Run("lease/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			l := leased(b, c, 1<<20)
			run(b, c, n, mode.parallel, true, func(ctx context.Context, key string) bool {
				d, err := l.AllowN(ctx, key, 1)
				if err != nil || !d.Allowed {
					b.Fatalf("lease: %+v, %v", d, err)
				}
				return true
			})
		})
		b.Run("sync/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, true, hotlimitRedis(b, c, ample))
		})
	}
}

// BenchmarkLeaseSteady: round trips per 1,000 decisions on one key at a
// steady rate per instance, in real time: one decision per tick of a
// 1ms ticker (1,000 per second, or fewer when the loaded machine drops
// ticks: decisions/s reports the rate reached). The lease's size follows
// that rate (the default period, 100ms; maxLease the default tenth of the
// limit).
// Run it with -benchtime 3000x or so: each decision takes a millisecond.
func BenchmarkLeaseSteady(b *testing.B) {
	c, n := client(b)
	l := leased(b, c, 0)
	ctx := context.Background()
	decide := func() {
		if d, err := l.AllowN(ctx, "steady", 1); err != nil || !d.Allowed {
			b.Fatalf("lease: %+v, %v", d, err)
		}
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for range 200 { // past the first leases
		<-tick.C
		decide()
	}
	start, t0 := n.N(), time.Now()
	for b.Loop() {
		<-tick.C
		decide()
	}
	b.ReportMetric(float64(n.N()-start)*1000/float64(b.N), "roundtrips/1000")
	b.ReportMetric(float64(b.N)/time.Since(t0).Seconds(), "decisions/s")
}
