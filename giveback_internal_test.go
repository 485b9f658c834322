package hotlimit

import (
	"testing"
	"time"
)

// TestGiveBackReadsTheClockAfterTheWord: a give-back's instant is never
// older than a decision its CAS builds on. Between the give-back's clock
// read and its CAS, the clock moves 20 ms (two units of the bucket, which
// the admission's units refill) and the key is drained; the CAS then fails
// and the give-back must decide again on a new reading, which owes the
// admission nothing: the key admits exactly Burst units at that instant.
func TestGiveBackReadsTheClockAfterTheWord(t *testing.T) {
	for _, p := range []Policy{
		TokenBucket{Rate: PerSecond(100), Burst: 5},
		LeakyBucket{Rate: PerSecond(100), Capacity: 4},
	} {
		clock := NewManualClock()
		clock.Set(time.Hour)
		l, err := New(p, WithClock(clock), WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		var a Admission
		l.AdmitN(&a, "k", 2)
		l.AllowN("k", 1) // so that the give-back leaves the state not fresh
		drained := int64(0)
		giveBackReadHook = func() {
			if drained == 0 {
				clock.Advance(20 * time.Millisecond)
				for l.Allow("k").Allowed {
					drained++
				}
			}
		}
		a.Refund()
		giveBackReadHook = nil
		after := int64(0)
		for l.Allow("k").Allowed {
			after++
		}
		if drained+after != 4 {
			t.Errorf("%T: %d admitted by the drain and %d after the give-back, at one instant; want 4 (5 minus the unit that has not refilled)", p, drained, after)
		}
		l.Close()
	}
}
