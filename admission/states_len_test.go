package admission_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// TestAllowStatesLength: Local.AllowStates given a states slice of
// another length than its layers (a caller's reusable buffer) neither
// panics nor reports a state for a layer it did not decide: it fills the
// states of the layers it has, and marks the rest unknown (Remaining −1).
func TestAllowStatesLength(t *testing.T) {
	b, err := admission.NewLocal(map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, n := range []int{0, 1, 2, 9, 12} {
		for _, nl := range []int{1, 3, 10} {
			layers := make([]admission.Layer, nl)
			for i := range layers {
				layers[i] = admission.Layer{Limit: "l", Key: fmt.Sprint(n, nl, i), Cost: 1}
			}
			states := make([]hotlimit.LayerState, n)
			for i := range states {
				states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: 77}}
			}
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("%d layers, %d states: panic %v", nl, n, r)
					}
				}()
				d, _, err := b.AllowStates(context.Background(), layers, states)
				if err != nil || !d.Allowed {
					t.Fatalf("%d layers, %d states: %+v, %v", nl, n, d, err)
				}
			}()
			for i, st := range states {
				if i < nl && (st.Decision.Remaining < 0 || st.Decision.Remaining > 4) || i >= nl && st.Decision.Remaining != -1 {
					t.Fatalf("%d layers, %d states: states[%d] = %+v", nl, n, i, st)
				}
			}
		}
	}
}
