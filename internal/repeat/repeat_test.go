package repeat

import "testing"

type layer struct {
	lim *int
	key string
}

// TestFirst: a layer's first twin is the earliest layer of the same
// limiter and key; another key, another limiter or a nil limiter is no
// twin.
func TestFirst(t *testing.T) {
	a, b := new(int), new(int)
	ls := []layer{{a, "k"}, {b, "k"}, {a, "j"}, {nil, "k"}, {a, "k"}, {nil, "k"}, {b, "k"}}
	of := func(j int) (*int, string) { return ls[j].lim, ls[j].key }
	want := []int{0, 1, 2, 3, 0, 5, 1}
	for i, w := range want {
		if got := First(i, of); got != w {
			t.Errorf("First(%d) = %d, want %d", i, got, w)
		}
	}
	for n, w := range []bool{false, false, false, false, false, true} {
		if got := Any(n, of); got != w {
			t.Errorf("Any(first %d) = %v, want %v", n, got, w)
		}
	}
	nils := []layer{{nil, "k"}, {nil, "k"}}
	if Any(2, func(j int) (*int, string) { return nils[j].lim, nils[j].key }) {
		t.Error("two nil limiters repeat")
	}
}
