package hotlimit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestMaxKeysConcurrentFloodSparesDrainedKeys: 8 goroutines each add 1,000
// new keys, each using 1 unit, into a limiter held at WithMaxKeys(n) by
// drained keys and the flood. A drained key with fewer than 3 others as
// drained is never evicted (WithMaxKeys), under any number of concurrent
// insertions: every eviction must compare it with a fresher key, and the
// room reserved by an insertion still in flight is not one. Time is
// frozen, so the drained keys stay drained; the test asserts the promise
// at the end, whatever the schedule, and Len() ≤ n throughout.
func TestMaxKeysConcurrentFloodSparesDrainedKeys(t *testing.T) {
	policies := []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 5},
		hotlimit.LeakyBucket{Rate: hotlimit.PerHour(1), Capacity: 4},
		hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
		hotlimit.SlidingWindow{Limit: 5, Window: time.Hour},
		hotlimit.SlidingLog{Limit: 5, Window: time.Hour},
	}
	const goroutines, perGoroutine = 8, 1000
	for _, c := range []struct{ max, drained int }{{2, 1}, {4, 3}, {8, 3}} {
		for _, p := range policies {
			t.Run(fmt.Sprintf("%T/max %d/%d drained", p, c.max, c.drained), func(t *testing.T) {
				l, _ := newManual(t, p, hotlimit.WithMaxKeys(c.max))
				for a := range c.drained {
					if d := l.AllowN(fmt.Sprint("drained:", a), 5); !d.Allowed {
						t.Fatalf("draining: %+v", d)
					}
				}
				over := make([]int, goroutines)
				inParallel(goroutines, func(g int) {
					for i := range perGoroutine {
						l.Allow(fmt.Sprintf("flood:%d:%d", g, i))
						if n := l.Len(); n > c.max {
							over[g] = n
						}
					}
				})
				for g, n := range over {
					if n != 0 {
						t.Fatalf("goroutine %d saw Len() = %d > %d", g, n, c.max)
					}
				}
				for a := range c.drained {
					if d := l.Check(fmt.Sprint("drained:", a), 0); d.Remaining != 0 {
						t.Fatalf("drained:%d was evicted by the flood: %+v", a, d)
					}
				}
			})
		}
	}
}
