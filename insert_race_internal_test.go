package hotlimit

import (
	"testing"
	"time"
)

// TestInsertPublishesFirstDecision replays, deterministically, a request
// that inserts a swept key racing a request on the same key whose reading
// is older than the sweep (a goroutine preempted after reading the clock,
// here at 100µs, while the inserter read 130µs):
// the second finds the new entry on the lock-free path right after it is
// published. The entry must already hold the inserter's admission. When it
// held the fresh word instead (a bucket's fresh word is TAT 0), the stale
// request decided it at its own reading, as if the swept state had owed
// nothing: both were admitted, 6 units at readings up to 130µs where the
// swept key had taken the whole Burst of 3 at 100µs.
func TestInsertPublishesFirstDecision(t *testing.T) {
	for name, p := range map[string]Policy{
		"TokenBucket": TokenBucket{Rate: Rate{N: 1, Per: 10 * time.Microsecond}, Burst: 3},
		"LeakyBucket": LeakyBucket{Rate: Rate{N: 1, Per: 10 * time.Microsecond}, Capacity: 2},
	} {
		t.Run(name, func(t *testing.T) {
			clk := NewManualClock()
			clk.Set(100 * time.Microsecond)
			l, err := New(p, WithClock(clk), WithSweepInterval(0), WithShards(1))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if d := l.AllowN("k", 3); !d.Allowed {
				t.Fatalf("first request: %+v", d)
			}
			clk.Set(130 * time.Microsecond) // the bucket is full again
			if n := l.Sweep(); n != 1 {
				t.Fatalf("Sweep removed %d keys, want 1", n)
			}
			h := l.hash("k")
			s := l.shardOf(h)
			var v verdict
			_, _, inserted := l.lockSlotFirst(s, h, "k", int64(clk.Now()), 3, firstAllow(3, &v)) // allowSlow's insertion
			clk.Set(100 * time.Microsecond)                                                      // the other request read 100µs
			stale := l.AllowN("k", 3)                                                            // lock-free: finds the new entry
			s.mu.Unlock()
			if stale.Allowed {
				t.Fatalf("the stale request was admitted too (%+v): 6 units at readings up to 130µs with a burst of 3", stale)
			}
			if !inserted || !v.ok {
				t.Fatalf("the inserter: inserted %v, %+v; want its admission", inserted, v)
			}
		})
	}
}
