package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/redislimit/redistest"
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
	states := make([]admission.LayerState, 2)
	d, i, err := AllowLayersState(ctx, states, layers...)
	if err != nil || !d.Allowed || i != 0 || states[0].Remaining != 1 || states[1].Remaining != 9 || states[0].Window <= 0 {
		t.Fatalf("first: %+v, binding %d, %v, states %+v; want admitted, a binding, Remaining 1 and 9", d, i, err, states)
	}
	// a has 1 left: refused, and b consumes nothing.
	d, i, err = AllowLayersState(ctx, states, layers...)
	if err != nil || d.Allowed || i != 0 || states[0].Remaining != 1 || states[1].Remaining != 9 {
		t.Fatalf("second: %+v, binding %d, %v, states %+v; want refused by a, b untouched (9)", d, i, err, states)
	}
	long := []admission.LayerState{{Remaining: 7}, {Remaining: 7}, {Remaining: 7}}
	d, _, err = AllowLayersState(ctx, long, Layer{Limiter: b, Key: "k", Cost: 4})
	if err != nil || !d.Allowed || long[0].Remaining != 5 || long[1].Remaining != -1 || long[2].Remaining != -1 {
		t.Fatalf("long states: %+v, %v, %+v; want Remaining 5, then unknown", d, err, long)
	}
}
