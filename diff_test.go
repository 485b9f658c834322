package hotlimit_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// policies used by the randomized tests: small limits so that denials,
// refills and window edges all happen often.
func testPolicies() []hotlimit.Policy {
	return []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 1},
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 7, Per: time.Second}, Burst: 5},
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 365 * 24 * time.Hour}, Burst: 3},
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1_000_000_000, Per: time.Second}, Burst: 1000},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 0},
		hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 3, Per: 700 * time.Millisecond}, Capacity: 4},
		hotlimit.FixedWindow{Limit: 5, Window: time.Second},
		hotlimit.FixedWindow{Limit: 1, Window: 3 * time.Millisecond},
		hotlimit.SlidingWindow{Limit: 7, Window: time.Second},
		hotlimit.SlidingWindow{Limit: 1_000_000, Window: 24 * time.Hour},
		hotlimit.SlidingWindow{Limit: 3, Window: 999 * time.Millisecond},
		hotlimit.SlidingLog{Limit: 5, Window: 15 * time.Minute},
		hotlimit.SlidingLog{Limit: 1, Window: 3 * time.Millisecond},
		hotlimit.SlidingLog{Limit: 64, Window: time.Second},
	}
}

// step sizes for the clock: enough variety to land on, before and after
// every edge.
func randAdvance(r *rand.Rand, scale time.Duration) time.Duration {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return time.Duration(r.IntN(3))
	case 2:
		return scale
	case 3:
		return time.Duration(r.Int64N(int64(scale) + 1))
	case 4:
		return time.Duration(r.Int64N(4*int64(scale) + 1))
	default:
		return time.Duration(r.Int64N(int64(scale)/10 + 1))
	}
}

func policyScale(p hotlimit.Policy) (time.Duration, int64) {
	switch p := p.(type) {
	case hotlimit.TokenBucket:
		return p.Rate.Interval(), p.Burst
	case hotlimit.LeakyBucket:
		return p.Rate.Interval(), p.Capacity + 1
	case hotlimit.FixedWindow:
		return p.Window, p.Limit
	case hotlimit.SlidingWindow:
		return p.Window, p.Limit
	case hotlimit.SlidingLog:
		return p.Window, p.Limit
	}
	panic("unknown policy")
}

// TestDifferential drives the limiter and the reference model through the
// same random operations (decisions, refunds of a key's latest admission,
// sweeps, and policy changes
// that halve or double a limit or a window) and requires identical
// decisions; on the model it also checks that RetryAfter is the shortest
// honest wait and Remaining is exact.
func TestDifferential(t *testing.T) {
	ops := 3000
	if testing.Short() {
		ops = 500
	}
	for pi, p := range testPolicies() {
		t.Run(fmt.Sprintf("%d-%T", pi, p), func(t *testing.T) {
			seed := uint64(42)
			if v, err := strconv.ParseUint(os.Getenv("HOTLIMIT_DIFF_SEED"), 10, 64); err == nil {
				seed = v // explore: HOTLIMIT_DIFF_SEED=n go test -run TestDifferential
			}
			r := rand.New(rand.NewPCG(uint64(pi), seed))
			c := hotlimit.NewManualClock()
			c.Set(time.Duration(r.Int64N(int64(time.Hour))))
			l, err := hotlimit.New(p, hotlimit.WithClock(c), hotlimit.WithSweepInterval(0), hotlimit.WithShards(2))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			m := refmodel.New(p, c)
			scale, limit := policyScale(p)
			keys := []string{"a", "b", "a-much-longer-key-stored-in-the-arena"}
			held := map[string]*hotlimit.Admission{}
			mheld := map[string]refmodel.Admission{}
			for _, k := range keys {
				held[k] = new(hotlimit.Admission)
			}
			lastOp := ""
			for i := 0; i < ops; i++ {
				if c.Now() < 140*365*24*time.Hour { // past 2^62 ns the limiter's clock stops
					c.Advance(randAdvance(r, scale))
				}
				key := keys[r.IntN(len(keys))]
				cost := r.Int64N(limit+3) - 1 // -1 .. limit+1
				if r.IntN(3) == 0 {
					cost = min(1, cost)
				}
				if r.IntN(50) == 0 {
					lastOp += "; Sweep"
					l.Sweep()
				}
				if r.IntN(10) == 0 {
					lastOp += fmt.Sprintf("; Refund(%q's latest admission, %+v)", key, mheld[key])
					held[key].Refund()
					m.GiveBack(mheld[key])
					mheld[key] = refmodel.Admission{}
				}
				if r.IntN(60) == 0 {
					// Halve or double the limit or the window: SetPolicy's
					// carry-over rules, against the model's.
					if v := policyVariant(p, r); v != nil {
						lastOp += fmt.Sprintf("; SetPolicy(%+v) at %v", v, c.Now())
						if err := l.SetPolicy(v); err != nil {
							t.Fatalf("op %d: SetPolicy(%+v): %v", i, v, err)
						}
						if !m.SetPolicy(v) {
							t.Fatalf("op %d: the model refused %+v", i, v)
						}
					}
				}
				// Every key's state, not only the one decided next: a
				// divergence is reported right after the operation that
				// caused it.
				for _, k := range keys {
					if a, b := l.AllowN(k, 0), m.Peek(k); a != b {
						t.Fatalf("before op %d (key %q cost %d): state of %q diverged:\n got %+v\nwant %+v\nsince: %s", i, key, cost, k, a, b, lastOp)
					}
				}
				lastOp = fmt.Sprintf("op %d key %q cost %d", i, key, cost)
				got := l.AdmitN(held[key], key, cost)
				want, ma := m.AdmitN(key, cost)
				mheld[key] = ma
				if got != want {
					t.Fatalf("op %d at %v key %q cost %d:\n got %+v\nwant %+v", i, c.Now(), key, cost, got, want)
				}
				checkHonest(t, m, key, cost, got, c.Now())
			}
		})
	}
}

// checkHonest checks, on copies of the model, that a denial's RetryAfter is
// the shortest wait and that Remaining unit requests pass at once and no
// more.
func checkHonest(t *testing.T, m *refmodel.Model, key string, cost int64, d hotlimit.Decision, now time.Duration) {
	t.Helper()
	const saturation = 1 << 62 // the limiter's clock stops here
	if !d.Allowed && d.RetryAfter != hotlimit.Never && now+d.RetryAfter <= saturation {
		c := hotlimit.NewManualClock()
		c.Set(now + d.RetryAfter - 1)
		if m.Clone(c).AllowN(key, cost).Allowed {
			t.Fatalf("at %v key %q cost %d: admitted 1ns before RetryAfter %v", now, key, cost, d.RetryAfter)
		}
		c.Set(now + d.RetryAfter)
		if !m.Clone(c).AllowN(key, cost).Allowed {
			t.Fatalf("at %v key %q cost %d: denied at RetryAfter %v", now, key, cost, d.RetryAfter)
		}
	}
	if d.Remaining > 64 {
		return // counting one by one is for small limits
	}
	c := hotlimit.NewManualClock()
	c.Set(now)
	mm := m.Clone(c)
	for i := int64(0); i < d.Remaining; i++ {
		if !mm.AllowN(key, 1).Allowed {
			t.Fatalf("at %v key %q: Remaining %d but unit %d denied", now, key, d.Remaining, i)
		}
	}
	if mm.AllowN(key, 1).Allowed {
		t.Fatalf("at %v key %q: Remaining %d but one more admitted", now, key, d.Remaining)
	}
}

// policyVariant returns p with its limit or its window (or rate) halved or
// doubled, at random, or nil if hotlimit.New rejects that variant.
func policyVariant(p hotlimit.Policy, r *rand.Rand) hotlimit.Policy {
	// vary halves or doubles *a or, as often, *b.
	vary := func(a *int64, b *time.Duration) {
		f := func(x int64) int64 {
			if r.IntN(2) == 0 {
				return max(1, x/2)
			}
			return x * 2
		}
		if r.IntN(2) == 0 {
			*a = f(*a)
		} else {
			*b = time.Duration(f(int64(*b)))
		}
	}
	switch q := p.(type) {
	case hotlimit.TokenBucket:
		vary(&q.Burst, &q.Rate.Per)
		p = q
	case hotlimit.LeakyBucket:
		q.Capacity++ // vary the Limit, Capacity+1
		vary(&q.Capacity, &q.Rate.Per)
		q.Capacity--
		p = q
	case hotlimit.FixedWindow:
		vary(&q.Limit, &q.Window)
		p = q
	case hotlimit.SlidingWindow:
		vary(&q.Limit, &q.Window)
		p = q
	case hotlimit.SlidingLog:
		vary(&q.Limit, &q.Window)
		q.Limit = min(q.Limit, hotlimit.MaxLogLimit)
		p = q
	}
	l, err := hotlimit.New(p, hotlimit.WithSweepInterval(0))
	if err != nil {
		return nil
	}
	l.Close()
	return p
}
