package hotlimit

import (
	"testing"
	"time"
)

// TestRefusedReservationPublishesNothing replays, deterministically, a
// Wait whose context deadline passed between its checks (reserve with a
// negative maxWait) on a key the sweeper has just removed, racing a
// lock-free request whose reading is older than the sweep. The refused
// reservation must leave nothing that request can decide on: when it
// published the fresh word and retired it a moment later, the stale
// request found the word in between and decided it at its own reading, as
// if the swept state had owed nothing. Rate 1/s, Burst 1: admitted at 0,
// swept at 2 s, then the stale request (reading 0.5 s) and one at 2 s
// were both admitted: 2 units at 2 s.
func TestRefusedReservationPublishesNothing(t *testing.T) {
	for name, p := range map[string]Policy{
		"TokenBucket": TokenBucket{Rate: PerSecond(1), Burst: 1},
		"LeakyBucket": LeakyBucket{Rate: PerSecond(1), Capacity: 0},
	} {
		t.Run(name, func(t *testing.T) {
			clk := NewManualClock()
			l, err := New(p, WithClock(clk), WithSweepInterval(0), WithShards(1))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if d := l.Allow("k"); !d.Allowed {
				t.Fatalf("first request: %+v", d)
			}
			clk.Set(2 * time.Second)
			if n := l.Sweep(); n != 1 {
				t.Fatalf("Sweep removed %d keys, want 1", n)
			}
			h := l.hash("k")
			s := l.shardOf(h)
			admitted := 0
			staleRan := false
			stale := int64(500 * time.Millisecond) // read before the sweep
			firstDecidedHook = func() {
				// The lock-free half of AllowN, with the mutex held by
				// the reservation: what it finds published now.
				firstDecidedHook = nil
				if sl := s.tab.Load().find(h, "k"); sl != nil {
					staleRan = true
					if v, _, ok := l.decide(s.tab.Load().p, &sl.word, stale, 1); ok && v.ok {
						admitted++
					}
				}
			}
			defer func() { firstDecidedHook = nil }()
			if _, _, ok := l.reserve("k", 1, -1); ok {
				t.Fatal("a reservation with a deadline already past was granted")
			}
			if !staleRan { // nothing was published: the stale request takes the mutex
				clk.Set(time.Duration(stale))
				if l.Allow("k").Allowed {
					admitted++
				}
				clk.Set(2 * time.Second)
			}
			if l.Allow("k").Allowed {
				admitted++
			}
			if admitted != 1 {
				t.Fatalf("%d admitted at 2 s (the stale request and one at 2 s), want 1: Burst 1", admitted)
			}
		})
	}
}
