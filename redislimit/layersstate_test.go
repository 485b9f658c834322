package redislimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestAllowLayersState: limiters held by the caller report each layer's
// own state from the decision's script call, all or nothing, and a
// states of the wrong length gets what it has room for.
func TestAllowLayersState(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	p := redistest.Prefix(t)
	opts := []Option{WithPrefix(p), WithTimeout(5 * time.Second)}
	a := must(New(c, "a", hotlimit.FixedWindow{Limit: 3, Window: time.Hour}, opts...))
	b := must(New(c, "b", hotlimit.FixedWindow{Limit: 10, Window: time.Hour}, opts...))
	ctx := context.Background()
	layers := []Layer{{Limiter: a, Key: "k", Cost: 2}, {Limiter: b, Key: "k", Cost: 1}}
	states := make([]hotlimit.LayerState, 2)
	d, i, err := AllowLayersState(ctx, states, layers...)
	if err != nil || !d.Allowed || i != 0 || states[0].Decision.Remaining != 1 || states[1].Decision.Remaining != 9 || states[0].Next <= 0 {
		t.Fatalf("first: %+v, binding %d, %v, states %+v; want admitted, a binding, Remaining 1 and 9", d, i, err, states)
	}
	// a has 1 left: refused, and b consumes nothing.
	d, i, err = AllowLayersState(ctx, states, layers...)
	if err != nil || d.Allowed || i != 0 || states[0].Decision.Remaining != 1 || states[1].Decision.Remaining != 9 {
		t.Fatalf("second: %+v, binding %d, %v, states %+v; want refused by a, b untouched (9)", d, i, err, states)
	}
	long := []hotlimit.LayerState{{Decision: hotlimit.Decision{Remaining: 7}}, {Decision: hotlimit.Decision{Remaining: 7}}, {Decision: hotlimit.Decision{Remaining: 7}}}
	d, _, err = AllowLayersState(ctx, long, Layer{Limiter: b, Key: "k", Cost: 4})
	if err != nil || !d.Allowed || long[0].Decision.Remaining != 5 || long[1].Decision.Remaining != -1 || long[2].Decision.Remaining != -1 {
		t.Fatalf("long states: %+v, %v, %+v; want Remaining 5, then unknown", d, err, long)
	}
}

// TestAllowLayersStateKeyTooLong: a layer whose key is longer than
// hotlimit.MaxKeyLen is refused without a call, with the state
// hotlimit.AllowLayersState reports of it (nothing left, no unit ever
// back: Remaining 0, Window Never), wherever it stands and when its
// limiter and key repeat; the other layers, not read, are unknown
// (Remaining -1), never a zero state that would read as full. A layer
// with a nil Limiter reports the same state, as in hotlimit.
func TestAllowLayersStateKeyTooLong(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	p := redistest.Prefix(t)
	opts := []Option{WithPrefix(p), WithTimeout(5 * time.Second)}
	a := must(New(c, "a", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 3}, opts...))
	b := must(New(c, "b", hotlimit.FixedWindow{Limit: 10, Window: time.Hour}, opts...))
	long := strings.Repeat("x", hotlimit.MaxKeyLen+1)
	ctx := context.Background()
	over := hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: 0}, Next: hotlimit.Never}
	unknown := hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
	for _, tc := range []struct {
		name   string
		layers []Layer
		want   []hotlimit.LayerState
		i      int // the binding layer
	}{
		{"first", []Layer{{Limiter: a, Key: long, Cost: 1}, {Limiter: b, Key: "k", Cost: 1}}, []hotlimit.LayerState{over, unknown}, 0},
		{"second", []Layer{{Limiter: b, Key: "k", Cost: 1}, {Limiter: a, Key: long, Cost: 1}}, []hotlimit.LayerState{unknown, over}, 1},
		{"repeated", []Layer{{Limiter: a, Key: long, Cost: 1}, {Limiter: b, Key: "k", Cost: 1}, {Limiter: a, Key: long, Cost: 1}}, []hotlimit.LayerState{over, unknown, over}, 0},
		{"nil limiter", []Layer{{Limiter: b, Key: "k", Cost: 1}, {Key: "k", Cost: 1}}, []hotlimit.LayerState{unknown, over}, 1},
	} {
		states := make([]hotlimit.LayerState, len(tc.layers))
		for j := range states {
			states[j] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: 7}, Next: time.Second} // overwritten
		}
		d, i, err := AllowLayersState(ctx, states, tc.layers...)
		want := hotlimit.Decision{Limit: 3, RetryAfter: hotlimit.Never}
		if tc.layers[tc.i].Limiter == nil {
			want.Limit = 0
		}
		if err != nil || d != want || i != tc.i {
			t.Fatalf("%s: %+v, binding %d, %v; want %+v, binding %d", tc.name, d, i, err, want, tc.i)
		}
		for j, st := range states {
			if st != tc.want[j] {
				t.Fatalf("%s: states %+v, want %+v", tc.name, states, tc.want)
			}
		}
	}
	// b's key was never read, let alone consumed.
	if d, err := b.AllowN(ctx, "k", 0); err != nil || d.Remaining != 10 {
		t.Fatalf("b after: %+v, %v; want Remaining 10", d, err)
	}
}
