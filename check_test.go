package hotlimit_test

import (
	"testing"
	"time"
)

// TestCheck: Check answers what AllowN would, at every step of a drain
// and a refill of each policy, without changing the state, the key count
// or Stats; and Check(key, r+1).RetryAfter is exactly when the r+1-th
// unit comes back.
func TestCheck(t *testing.T) {
	for name, p := range resetPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			twin, tc := newManual(t, p) // gets the AllowN that Check stands for
			c.Set(500*time.Second + 250*time.Millisecond)
			tc.Set(c.Now())
			if d := l.Check("k", 1); !d.Allowed || l.Len() != 0 {
				t.Fatalf("Check on a new key: %+v, Len %d", d, l.Len())
			}
			for i := range 12 {
				before := l.Stats()
				for _, cost := range []int64{0, 1, 2, 4, -1} {
					got := l.Check("k", cost)
					want := twin.AllowN("k", cost)
					if want.Allowed && cost > 0 {
						twin.Refund("k", cost) // undo, so the twin stays l's copy
						want.Remaining, want.ResetAfter = got.Remaining, got.ResetAfter
					}
					if got != want {
						t.Fatalf("step %d, cost %d: Check %+v, AllowN %+v", i, cost, got, want)
					}
				}
				if after := l.Stats(); after != before {
					t.Fatalf("step %d: Check changed Stats from %+v to %+v", i, before, after)
				}
				r := l.Check("k", 0).Remaining
				if r < 3 {
					next := l.Check("k", r+1).RetryAfter
					c.Advance(next - 1)
					if l.Check("k", 0).Remaining != r {
						t.Fatalf("step %d: Remaining grew before Check(r+1).RetryAfter %v", i, next)
					}
					c.Advance(1)
					if got := l.Check("k", 0).Remaining; got <= r {
						t.Fatalf("step %d: Remaining %d at Check(r+1).RetryAfter %v, want > %d", i, got, next, r)
					}
					tc.Advance(next)
				}
				l.AllowN("k", 2)
				twin.AllowN("k", 2)
				c.Advance(300 * time.Millisecond)
				tc.Advance(300 * time.Millisecond)
			}
		})
	}
}
