package hotlimitd

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestAlgorithmOf: the algorithm the observers are told, read from the
// policy's type, is Describe's for every policy type config makes, and
// costs no allocation.
func TestAlgorithmOf(t *testing.T) {
	r := hotlimit.Rate{N: 10, Per: time.Second}
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: r, Burst: 3},
		hotlimit.LeakyBucket{Rate: r, Capacity: 2},
		hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
		hotlimit.SlidingWindow{Limit: 5, Window: time.Minute},
		hotlimit.SlidingLog{Limit: 5, Window: time.Minute},
	} {
		pi, err := hotlimit.Describe(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := algorithmOf(p); got != pi.Algorithm {
			t.Errorf("%T: algorithmOf %v, Describe %v", p, got, pi.Algorithm)
		}
		if n := testing.AllocsPerRun(100, func() { algorithmOf(p) }); n != 0 {
			t.Errorf("%T: %v allocations, want 0", p, n)
		}
	}
}
