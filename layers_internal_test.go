package hotlimit

import "testing"

// TestHasRepeat covers each of hasRepeat's branches (2, 3 and more
// layers): a repeat is the same limiter and the same key; the same
// limiter with another key, and nil limiters, are none.
func TestHasRepeat(t *testing.T) {
	a, b := &Limiter{}, &Limiter{}
	la, la2, lb, none := Layer{Limiter: a, Key: "k"}, Layer{Limiter: a, Key: "k2"}, Layer{Limiter: b, Key: "k"}, Layer{Key: "k"}
	for _, tc := range []struct {
		layers []Layer
		want   bool
	}{
		{nil, false},
		{[]Layer{la}, false},
		{[]Layer{la, la}, true},
		{[]Layer{la, la2}, false},
		{[]Layer{la, lb}, false},
		{[]Layer{none, none}, false},
		{[]Layer{la, lb, la}, true},
		{[]Layer{lb, la, la}, true},
		{[]Layer{la, la2, lb}, false},
		{[]Layer{none, lb, none}, false},
		{[]Layer{la, lb, none, la2}, false},
		{[]Layer{la, lb, none, la2, lb}, true},
		{[]Layer{none, la2, lb, none, la}, false},
	} {
		if got := hasRepeat(tc.layers); got != tc.want {
			t.Errorf("hasRepeat(%v) = %v, want %v", tc.layers, got, tc.want)
		}
	}
}
