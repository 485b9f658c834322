package hotlimit_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
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
					var a hotlimit.Admission
					want := twin.AdmitN(&a, "k", cost)
					if want.Allowed && cost > 0 {
						a.Refund() // undo, so the twin stays l's copy
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

// TestCheckResetDifferential drives each policy through random decisions,
// refunds of the latest admission of a key (which a Reset in between
// leaves nothing to give back), sweeps, Resets and Checks on a few keys,
// against one reference model per key (a Reset starts the key's model
// afresh): every AllowN must
// equal the model's, and every Check must equal what the model's AllowN
// would decide on a copy (Allowed, RetryAfter, Delay) with the model's
// current Remaining and ResetAfter, changing neither Len nor Stats.
func TestCheckResetDifferential(t *testing.T) {
	for pi, p := range testPolicies() {
		t.Run(fmt.Sprintf("%d-%T", pi, p), func(t *testing.T) {
			for seed := range uint64(8) {
				r := rand.New(rand.NewPCG(uint64(pi), seed))
				c := hotlimit.NewManualClock()
				c.Set(time.Duration(r.Int64N(int64(time.Hour))))
				l, err := hotlimit.New(p, hotlimit.WithClock(c), hotlimit.WithSweepInterval(0), hotlimit.WithShards(2))
				if err != nil {
					t.Fatal(err)
				}
				keys := []string{"a", "b", "c"}
				ms := map[string]*refmodel.Model{}
				for _, k := range keys {
					ms[k] = refmodel.New(p, c)
				}
				scale, limit := policyScale(p)
				type admitted struct {
					l *hotlimit.Admission
					m refmodel.Admission
				}
				held := map[string]*admitted{}
				for _, k := range keys {
					held[k] = &admitted{l: new(hotlimit.Admission)}
				}
				hist := ""
				for i := 0; i < 300; i++ {
					c.Advance(randAdvance(r, scale))
					key := keys[r.IntN(len(keys))]
					m := ms[key]
					cost := r.Int64N(limit+3) - 1
					if r.IntN(3) == 0 {
						cost = min(1, cost)
					}
					switch r.IntN(8) {
					case 0:
						hist += fmt.Sprintf("; Reset(%s)@%v", key, c.Now())
						l.Reset(key)
						ms[key] = refmodel.New(p, c)
						held[key].m = refmodel.Admission{} // the reset forgot it: nothing to give back
					case 1:
						hist += fmt.Sprintf("; Refund(%s)@%v", key, c.Now())
						held[key].l.Refund()
						m.GiveBack(held[key].m)
						held[key].m = refmodel.Admission{}
					case 2:
						hist += "; Sweep"
						l.Sweep()
						for _, m := range ms {
							m.Sweep()
						}
					case 3, 4:
						st, n := l.Stats(), l.Len()
						got := l.Check(key, cost)
						cl := hotlimit.NewManualClock()
						cl.Set(c.Now())
						w := m.Clone(cl).AllowN(key, cost)
						pk := m.Peek(key)
						want := hotlimit.Decision{Allowed: w.Allowed, Limit: w.Limit, Remaining: pk.Remaining, RetryAfter: w.RetryAfter, ResetAfter: pk.ResetAfter, Delay: w.Delay}
						if got != want {
							t.Fatalf("seed %d op %d Check(%s,%d)@%v:\n got %+v\nwant %+v\n%s", seed, i, key, cost, c.Now(), got, want, hist)
						}
						if l.Len() != n || l.Stats() != st {
							t.Fatalf("seed %d op %d: Check(%s,%d) changed Len %d → %d or Stats %+v → %+v", seed, i, key, cost, n, l.Len(), st, l.Stats())
						}
					default:
						hist += fmt.Sprintf("; AllowN(%s,%d)@%v", key, cost, c.Now())
						got := l.AdmitN(held[key].l, key, cost)
						want, ma := m.AdmitN(key, cost)
						held[key].m = ma
						if got != want {
							t.Fatalf("seed %d op %d AllowN(%s,%d)@%v:\n got %+v\nwant %+v\n%s", seed, i, key, cost, c.Now(), got, want, hist)
						}
					}
				}
				l.Close()
			}
		})
	}
}
