package hotlimit_test

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestAllowLayersState runs random layered requests through
// AllowLayersState on a moving manual clock: each state's Decision is
// what AllowLayersEach reports on a twin set of limiters, its Next is
// Check(key, Remaining+1).RetryAfter on the state it describes (no other
// request runs, so that state is the current one), 0 when full, and its
// Policy the policy in force.
func TestAllowLayersState(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 40 {
		ls, twin, clocks := twinLayers(t, rng)
		n := len(ls)
		states := make([]hotlimit.LayerState, n)
		each := make([]hotlimit.Decision, n)
		for step := range 30 {
			d, idx := hotlimit.AllowLayersState(states, ls...)
			wd, widx := hotlimit.AllowLayersEach(each, twin...)
			if d != wd || idx != widx {
				t.Fatalf("iter %d step %d: State %+v %d, Each %+v %d", iter, step, d, idx, wd, widx)
			}
			for i, ly := range ls {
				st := states[i]
				if st.Decision != each[i] {
					t.Fatalf("iter %d step %d layer %d: state %+v, each %+v", iter, step, i, st.Decision, each[i])
				}
				want := time.Duration(0)
				if r := st.Decision.Remaining; r < st.Decision.Limit {
					want = ly.Limiter.Check(ly.Key, r+1).RetryAfter
				}
				if st.Next != want {
					t.Fatalf("iter %d step %d layer %d (%s): Next %v, Check(r+1) %v; state %+v", iter, step, i, st.Policy.Algorithm, st.Next, want, st.Decision)
				}
				if pi := ly.Limiter.Describe(); st.Policy != pi {
					t.Fatalf("iter %d step %d layer %d: Policy %+v, Describe %+v", iter, step, i, st.Policy, pi)
				}
			}
			dt := time.Duration(rng.Int64N(int64(time.Second)))
			for _, c := range clocks {
				c.Advance(dt)
			}
		}
	}
}

// statePolicies holds a small policy of every algorithm.
var statePolicies = []hotlimit.Policy{
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(2), Burst: 3},
	hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 2},
	hotlimit.FixedWindow{Limit: 4, Window: 3 * time.Second},
	hotlimit.SlidingWindow{Limit: 4, Window: 3 * time.Second},
	hotlimit.SlidingLog{Limit: 3, Window: 2 * time.Second},
}

// twinLayers returns 1 to 3 random layers (a random policy of every
// algorithm, cost 1 or 2, key "a", "b", ...) on manual clocks, and their
// twins on limiters of their own, for a test that runs the same requests
// through two layered calls; clocks holds every clock, to move them
// together.
func twinLayers(t *testing.T, rng *rand.Rand) (ls, twin []hotlimit.Layer, clocks []*hotlimit.ManualClock) {
	policies := statePolicies
	for i := range 1 + rng.IntN(3) {
		p := policies[rng.IntN(len(policies))]
		a, ca := newManual(t, p)
		b, cb := newManual(t, p)
		clocks = append(clocks, ca, cb)
		cost := int64(1 + rng.IntN(2))
		key := string(rune('a' + i))
		ls = append(ls, hotlimit.Layer{Limiter: a, Key: key, Cost: cost})
		twin = append(twin, hotlimit.Layer{Limiter: b, Key: key, Cost: cost})
	}
	return ls, twin, clocks
}

// TestAllowLayersStatePolicy: the Policy of a state is the one the
// decision was made under, after a SetPolicy too, and Limit and Period
// follow it.
func TestAllowLayersStatePolicy(t *testing.T) {
	l, _ := newManual(t, hotlimit.FixedWindow{Limit: 5, Window: time.Hour})
	st := make([]hotlimit.LayerState, 1)
	hotlimit.AllowLayersState(st, hotlimit.Layer{Limiter: l, Key: "k", Cost: 1})
	if p := st[0].Policy; p.Algorithm != hotlimit.AlgorithmFixedWindow || p.Limit != 5 || p.Period() != time.Hour {
		t.Fatalf("before: %+v", p)
	}
	if err := l.SetPolicy(hotlimit.FixedWindow{Limit: 20, Window: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	hotlimit.AllowLayersState(st, hotlimit.Layer{Limiter: l, Key: "k", Cost: 1})
	if p, d := st[0].Policy, st[0].Decision; p.Limit != 20 || p.Window != 2*time.Hour || p.Period() != 2*time.Hour || d.Limit != 20 {
		t.Fatalf("after SetPolicy: %+v, %+v", p, d)
	}
}

// TestAllowLayersStateConcurrent: on a frozen clock, concurrent admissions
// on one sliding key each report their own Remaining (all distinct, each
// what the admission left), and a Next that is either Never (the state
// moved before it was read) or the one unit's wait of the state it
// describes (computed sequentially on a twin beforehand), never one of
// another state. Run with -race.
func TestAllowLayersStateConcurrent(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.SlidingWindow{Limit: 64, Window: time.Minute},
		hotlimit.SlidingLog{Limit: 64, Window: time.Minute},
	} {
		l, c := newManual(t, p)
		c.Set(90 * time.Second) // 30 s into a window
		const workers, each = 8, 8
		want := make([]time.Duration, 64) // by r: Next of the state an admission leaving r describes
		twin, tc := newManual(t, p)
		tc.Set(90 * time.Second)
		for r := 63; r >= 0; r-- {
			twin.Allow("k")
			want[r] = twin.Check("k", int64(r)+1).RetryAfter
		}
		seen := make([]bool, 64)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := make([]hotlimit.LayerState, 1)
				for range each {
					d, _ := hotlimit.AllowLayersState(st, hotlimit.Layer{Limiter: l, Key: "k", Cost: 1})
					if !d.Allowed {
						t.Errorf("%T: denied %+v", p, d)
						return
					}
					r := st[0].Decision.Remaining
					if n := st[0].Next; n != hotlimit.Never && n != want[r] {
						t.Errorf("%T: r=%d Next %v", p, r, n)
					}
					mu.Lock()
					if seen[r] {
						t.Errorf("%T: two admissions report r=%d", p, r)
					}
					seen[r] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
}

// TestAllowLayersStateShort: a states shorter than the layers receives
// the first layers' states, exactly those a long enough states receives,
// and the request is decided on every layer all the same.
func TestAllowLayersStateShort(t *testing.T) {
	p := hotlimit.FixedWindow{Limit: 3, Window: time.Minute}
	a1, _ := newManual(t, p)
	a2, _ := newManual(t, p)
	b1, _ := newManual(t, p)
	b2, _ := newManual(t, p)
	long := make([]hotlimit.LayerState, 2)
	short := make([]hotlimit.LayerState, 1)
	dl, il := hotlimit.AllowLayersState(long, hotlimit.Layer{Limiter: a1, Key: "k", Cost: 1}, hotlimit.Layer{Limiter: a2, Key: "k", Cost: 2})
	ds, is := hotlimit.AllowLayersState(short, hotlimit.Layer{Limiter: b1, Key: "k", Cost: 1}, hotlimit.Layer{Limiter: b2, Key: "k", Cost: 2})
	if dl != ds || il != is || short[0] != long[0] || b2.Check("k", 0).Remaining != 1 {
		t.Fatalf("long %+v %d %+v, short %+v %d %+v", dl, il, long, ds, is, short)
	}
	hotlimit.AllowLayersState(nil, hotlimit.Layer{Limiter: b1, Key: "k", Cost: 1}) // nil receives nothing, and does not panic
	if r := b1.Check("k", 0).Remaining; r != 1 {
		t.Fatalf("nil states: the layer was not decided (Remaining %d)", r)
	}
}

// TestAllowLayersStateKeyTooLong: a layer whose key is longer than
// MaxKeyLen, refused at it or checked after another layer refused, reports
// a state that is true of that key: no unit is left, none ever comes back
// (Next = Never, which Check(key, 1).RetryAfter also says), not the "full"
// of Next = 0, nor a negative wait. The other layer's state is its own.
// Every Decision for the key, through AllowN, Check and the layers, is the
// same documented denial (keys.go, MaxKeyLen).
func TestAllowLayersStateKeyTooLong(t *testing.T) {
	long := strings.Repeat("x", hotlimit.MaxKeyLen+1)
	for _, p := range statePolicies {
		l, _ := newManual(t, p)
		other, _ := newManual(t, hotlimit.FixedWindow{Limit: 1, Window: time.Minute})
		want := hotlimit.Decision{Limit: l.Describe().Limit, RetryAfter: hotlimit.Never}
		for _, c := range []int64{0, 1} {
			if d := l.AllowN(long, c); d != want {
				t.Fatalf("%T: AllowN(long, %d) = %+v, want %+v", p, c, d, want)
			}
			if d := l.Check(long, c); d != want {
				t.Fatalf("%T: Check(long, %d) = %+v, want %+v", p, c, d, want)
			}
		}
		other.Allow("spent") // the other layer refuses "spent" from now on
		for _, tc := range []struct {
			name   string
			layers []hotlimit.Layer
			long   int // the over-long layer's index
		}{
			{"refused by it", []hotlimit.Layer{{Limiter: l, Key: long, Cost: 1}, {Limiter: other, Key: "free", Cost: 1}}, 0},
			{"after it", []hotlimit.Layer{{Limiter: other, Key: "free", Cost: 1}, {Limiter: l, Key: long, Cost: 1}}, 1},
			{"checked after a refusal", []hotlimit.Layer{{Limiter: other, Key: "spent", Cost: 1}, {Limiter: l, Key: long, Cost: 1}}, 1},
		} {
			states := make([]hotlimit.LayerState, 2)
			d, _ := hotlimit.AllowLayersState(states, tc.layers...)
			if d.Allowed || d.RetryAfter != hotlimit.Never {
				t.Fatalf("%T %s: %+v, want denied with Never", p, tc.name, d)
			}
			st := states[tc.long]
			if st.Decision != want || st.Next != hotlimit.Never || st.Policy != l.Describe() {
				t.Fatalf("%T %s: over-long layer's state %+v, want Decision %+v, Next Never", p, tc.name, st, want)
			}
			o := tc.layers[1-tc.long]
			ost := states[1-tc.long]
			if c := other.Check(o.Key, 1); ost.Decision.Remaining != c.Remaining || ost.Decision.ResetAfter != c.ResetAfter {
				t.Fatalf("%T %s: other layer's state %+v, Check %+v", p, tc.name, ost, c)
			}
			if l.Len() != 0 || other.Len() != 1 {
				t.Fatalf("%T %s: Len %d and %d, want 0 and 1", p, tc.name, l.Len(), other.Len())
			}
		}
	}
}
