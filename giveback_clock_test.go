package hotlimit_test

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestGiveBackOnClockSetBack: a give-back whose reading is older than a
// decision the key's state reflects (a ManualClock set back) must not give
// back units that refilled before that decision. Here the admission's unit
// refills, the key is drained again 100 s later, the clock is set back to
// the admission's instant for the Refund and forward again: "k" must
// admit nothing more at the instant it was drained, Burst 2 in all.
func TestGiveBackOnClockSetBack(t *testing.T) {
	for name, p := range map[string]hotlimit.Policy{
		"TokenBucket": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 2},
		"LeakyBucket": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 1},
	} {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			c.Set(100 * time.Second)
			var a hotlimit.Admission
			if d := l.AdmitN(&a, "k", 1); !d.Allowed {
				t.Fatalf("AdmitN refused: %+v", d)
			}
			c.Set(200 * time.Second)
			if n := drain(t, l, "k"); n != 2 {
				t.Fatalf("a full bucket of 2 admitted %d", n)
			}
			c.Set(100 * time.Second) // set back
			a.Refund()
			c.Set(200 * time.Second)
			if n := drain(t, l, "k"); n != 0 {
				t.Errorf("after the give-back %q admits %d more at 200 s, where it had admitted its Burst of 2", "k", n)
			}
		})
	}
}
