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
// admission only what it still holds then: at that instant the key admits
// exactly Burst units, minus the one unit not given back that has not
// drained. Another unit keeps the give-back from leaving the state fresh:
// taken before the admission (and drained 10 ms before the reading, so
// the admission's second unit is still held and comes back), the give-back
// starts lock-free (refundAt) and, once the drain has put units above it,
// ends under the mutex; taken after (and not drained), it lands below that
// unit from the start and renews the entry under the mutex (refundLocked).
func TestGiveBackReadsTheClockAfterTheWord(t *testing.T) {
	for _, p := range []Policy{
		TokenBucket{Rate: PerSecond(100), Burst: 5},
		LeakyBucket{Rate: PerSecond(100), Capacity: 4},
	} {
		for _, below := range []bool{false, true} {
			clock := NewManualClock()
			clock.Set(time.Hour)
			l, err := New(p, WithClock(clock), WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			var a Admission
			if !below {
				l.AllowN("k", 1)
			}
			l.AdmitN(&a, "k", 2)
			if below {
				l.AllowN("k", 1)
			}
			drained, hooked := int64(0), false
			giveBackReadHook = func() {
				if !hooked {
					hooked = true
					clock.Advance(20 * time.Millisecond)
					for l.Allow("k").Allowed { // lock-free: the key is held
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
			want := int64(5) // the other unit has drained
			if below {
				want = 4 // it has not
			}
			if !hooked || drained+after != want {
				t.Errorf("%T, give-back below the other unit %v: %d admitted by the drain (hook run: %v) and %d after the give-back, at one instant; want %d", p, below, drained, hooked, after, want)
			}
			l.Close()
		}
	}
}
