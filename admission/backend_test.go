package admission

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestLayerState: for every policy, at random states, Local's
// AllowStates reports the layer's state after its own decision: with no
// other request running, Remaining is what Check says next and Window to
// the nanosecond Check(key, r+1).RetryAfter, and Policy the limit's.
func TestLayerState(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 5},
		&hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 7, Per: 10 * time.Second}, Burst: 4},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(3), Capacity: 4},
		&hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 7, Per: 10 * time.Second}, Capacity: 0},
		hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
		hotlimit.SlidingWindow{Limit: 5, Window: 7 * time.Second},
		hotlimit.SlidingLog{Limit: 5, Window: 7 * time.Second},
	} {
		clock := hotlimit.NewManualClock()
		clock.Set(1000*time.Second + 123456789)
		b, err := newLocal(map[string]hotlimit.Policy{"l": p}, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		lim := b.Classes().Class("l")
		states := make([]hotlimit.LayerState, 1)
		for step := range 300 {
			clock.Advance(time.Duration(rng.Int64N(int64(2 * time.Second))))
			if _, _, err := b.AllowStates(t.Context(), []Layer{{Limit: "l", Key: "k", Cost: int64(rng.IntN(3))}}, states); err != nil {
				t.Fatal(err)
			}
			st := states[0]
			if st.Policy != lim.Describe() {
				t.Fatalf("%T step %d: Policy %+v", p, step, st.Policy)
			}
			c := lim.Check("k", 0)
			if st.Decision.Remaining != c.Remaining {
				t.Fatalf("%T step %d: Remaining %d, Check says %d", p, step, st.Decision.Remaining, c.Remaining)
			}
			want := time.Duration(0)
			if c.Remaining < c.Limit {
				want = lim.Check("k", c.Remaining+1).RetryAfter
			}
			if st.Next != want {
				t.Fatalf("%T step %d: Window %v, Check(r+1) says %v (state %+v)", p, step, st.Next, want, c)
			}
		}
	}
}
