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
	b, err := admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))(map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}})
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

// partial is a Backend that admits every request and reports the state of
// every layer but the last, which it cannot tell (Remaining −1).
type partial struct{ all bool }

func (b partial) AllowStates(_ context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for i := range states {
		states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Allowed: true, Limit: 5, Remaining: 4}}
	}
	if !b.all && len(states) > 0 {
		states[len(states)-1].Decision.Remaining = -1
	}
	return hotlimit.Decision{Allowed: true, Limit: 5, Remaining: 4}, 0, nil
}

func (partial) Reset(context.Context, string, string) error { return nil }

func (partial) Close() error { return nil }

// TestItemKnownAllOrNone: Item.Known is true for every layer or for none,
// so that a transport can tell from Item(0) whether it may describe every
// layer: a backend that cannot tell one layer's state leaves them all
// unknown, and without Config.States none is asked.
func TestItemKnownAllOrNone(t *testing.T) {
	for _, tc := range []struct {
		all, states, want bool
	}{{true, true, true}, {false, true, false}, {true, false, false}} {
		p, err := admission.New(admission.Config[string]{
			Limits:  map[string]hotlimit.Policy{"g": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}, "glob": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
			Groups:  []admission.Group[string]{{Name: "g", Limit: "g"}},
			Global:  "glob",
			Key:     func(dst []byte, r string) ([]byte, error) { return append(dst, "usr:"+r...), nil },
			Backend: func(map[string]hotlimit.Policy) (admission.Backend, error) { return partial{tc.all}, nil },
			States:  tc.states,
		})
		if err != nil {
			t.Fatal(err)
		}
		res := p.Decide(context.Background(), "a", 0, 1)
		if res.Layers() != 2 {
			t.Fatalf("%d layers, want 2", res.Layers())
		}
		for i := range res.Layers() {
			if k := res.Item(i).Known; k != tc.want {
				t.Errorf("backend reports all: %v, States %v: Item(%d).Known = %v, want %v", tc.all, tc.states, i, k, tc.want)
			}
		}
		p.Release(res)
		p.Close()
	}
}
