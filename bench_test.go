package hotlimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// Micro-benchmarks of the core. Peers and the many-key rows live in the
// bench/ module; these track the engine itself, beside the reference model.

type allowFunc func(key string) hotlimit.Decision

func benchSubjects(b *testing.B, p hotlimit.Policy) map[string]allowFunc {
	def := newLimiter(b, p)
	coarse := newLimiter(b, p, hotlimit.WithCoarseClock(time.Millisecond))
	ref := refmodel.New(p, hotlimit.SystemClock{})
	return map[string]allowFunc{"clock=default": def.Allow, "clock=coarse": coarse.Allow, "impl=reference": ref.Allow}
}

var benchPolicies = []struct {
	name string
	p    hotlimit.Policy
}{
	{"TokenBucket", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1_000_000_000, Per: time.Second}, Burst: 1_000_000_000}},
	{"FixedWindow", hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour}},
	{"SlidingWindow", hotlimit.SlidingWindow{Limit: 1<<21 - 1, Window: 100 * time.Millisecond}},
	{"LeakyBucket", hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 1_000_000_000, Per: time.Second}, Capacity: 1_000_000}},
}

func BenchmarkAllowOneKey(b *testing.B) {
	for _, bp := range benchPolicies {
		for name, allow := range benchSubjects(b, bp.p) {
			b.Run(bp.name+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				allow("user:123456")
				for b.Loop() {
					allow("user:123456")
				}
			})
			b.Run(bp.name+"/"+name+"/parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						allow("user:123456")
					}
				})
			})
		}
	}
}

func BenchmarkAllowDenied(b *testing.B) {
	l, _ := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, hotlimit.WithSweepInterval(0))
	defer l.Close()
	l.Allow("k")
	b.ReportAllocs()
	for b.Loop() {
		if l.Allow("k").Allowed {
			b.Fatal("admitted")
		}
	}
}

func BenchmarkAllowKeys(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("user:%06d", i)
		}
		l, _ := hotlimit.New(benchPolicies[0].p, hotlimit.WithSweepInterval(0))
		for _, k := range keys {
			l.Allow(k)
		}
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Allow(keys[i])
				if i++; i == n {
					i = 0
				}
			}
		})
		l.Close()
	}
}
