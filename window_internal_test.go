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
