package hotlimit

import (
	"testing"
	"time"
)

func TestWindowModes(t *testing.T) {
	cases := []struct {
		limit   int64
		w       time.Duration
		sliding bool
		exact   bool
	}{
		{1_000_000, time.Millisecond, false, true},
		{1_000_000, time.Microsecond, false, false},
		{1, time.Nanosecond, false, true},
		{1_000_000, time.Hour, true, true},
		{2000, time.Second, true, true},
		{1_000_000, time.Second, true, false},
		{1 << 40, time.Nanosecond, false, false},
	}
	for _, tc := range cases {
		x, ok := newWindow(tc.limit, tc.w, tc.sliding)
		if !ok || x.exact != tc.exact {
			t.Errorf("newWindow(%d, %v, sliding=%v): ok %v exact %v, want exact %v", tc.limit, tc.w, tc.sliding, ok, x.exact, tc.exact)
		}
	}
}

// TestWindowRefundAcrossEdge: an admission in window k is given back from
// the previous-window count once the word has moved to window k+1.
func TestWindowRefundAcrossEdge(t *testing.T) {
	x, _ := newWindow(10, time.Second, true)
	w, v, at := x.stepAt(0, int64(900*time.Millisecond), 4) // window 0: q = 4
	if !v.ok {
		t.Fatal("denied")
	}
	w, _, _ = x.stepAt(w, int64(1100*time.Millisecond), 1) // window 1: p = 4, q = 1
	w = x.refund(w, 4, at)
	if p, q := x.p(w), x.q(w); p != 0 || q != 1 || x.index(w) != 1 {
		t.Fatalf("after refund: p %d q %d index %d, want 0 1 1", p, q, x.index(w))
	}
	if x.refund(w, 4, at) != w {
		t.Fatal("a second refund changed the word")
	}
}
