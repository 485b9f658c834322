package httpretry

import (
	"testing"
	"time"
)

// TestJitterBounded is a property test over many seeds: every backoff
// lies in [0, min(MaxDelay, BaseDelay·2^n)], and the draws spread over the
// range (full jitter, not a constant).
func TestJitterBounded(t *testing.T) {
	tr := &Transport{BaseDelay: 10 * time.Millisecond, MaxDelay: time.Second}
	for n := range 12 {
		ceil := min(tr.MaxDelay, tr.BaseDelay<<n)
		lo, hi := time.Duration(1<<62), time.Duration(-1)
		for seed := range uint64(2000) {
			tr.randN = lockedRand(seed)
			d := tr.backoff(n)
			if d < 0 || d > ceil {
				t.Fatalf("attempt %d seed %d: backoff %v outside [0, %v]", n, seed, d, ceil)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo > ceil/20 || hi < ceil-ceil/20 {
			t.Errorf("attempt %d: draws span [%v, %v] of [0, %v]; not full jitter", n, lo, hi, ceil)
		}
	}
}

func TestBackoffCap(t *testing.T) {
	for _, tc := range []struct {
		base, max time.Duration
		n         int
		want      time.Duration
	}{
		{0, 0, 0, DefaultBaseDelay},
		{0, 0, 3, 8 * DefaultBaseDelay},
		{0, 0, 1000, DefaultMaxDelay},
		{time.Second, time.Millisecond, 0, time.Millisecond},
		{-time.Second, -1, 2, 4 * DefaultBaseDelay},
		{1 << 61, 1<<63 - 1, 5, 1<<63 - 1},
		{3, 1<<63 - 1, 70, 1<<63 - 1},
	} {
		if got := backoffCap(tc.base, tc.max, tc.n); got != tc.want {
			t.Errorf("backoffCap(%v, %v, %d) = %v, want %v", tc.base, tc.max, tc.n, got, tc.want)
		}
	}
}
