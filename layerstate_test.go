package hotlimit_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestAllowLayersState runs random layered requests through
// AllowLayersState on a moving manual clock and, on a twin set of
// limiters, AllowLayersState without states: the two agree on the
// Decision and the binding layer, and states[i] is layer i's own view
// after the call. Its Decision has the layer's Limit, its state's
// Remaining and ResetAfter, and, when the request was refused, what Check
// of its cost says now; its Next is Check(key, Remaining+1).RetryAfter on
// the state it describes (no other request runs, so that state is the
// current one), 0 when full; its Policy is the policy in force.
func TestAllowLayersState(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := range 40 {
		ls, twin, clocks := twinLayers(t, rng)
		n := len(ls)
		states := make([]hotlimit.LayerState, n+iter%3) // room to spare is allowed
		for step := range 30 {
			d, idx := hotlimit.AllowLayersState(states, ls...)
			wd, widx := hotlimit.AllowLayersState(nil, twin...)
			if d != wd || idx != widx {
				t.Fatalf("iter %d step %d: states %+v %d, none %+v %d", iter, step, d, idx, wd, widx)
			}
			for i, ly := range ls {
				st := states[i]
				e, now := st.Decision, ly.Limiter.Check(ly.Key, 0)
				if e.Limit != ly.Limiter.Limit() || e.Remaining != now.Remaining || e.ResetAfter != now.ResetAfter {
					t.Fatalf("iter %d step %d layer %d: state %+v, state now %+v", iter, step, i, e, now)
				}
				if d.Allowed != e.Allowed && d.Allowed {
					t.Fatalf("iter %d step %d layer %d: admitted, state %+v", iter, step, i, e)
				}
				if !d.Allowed {
					if c := ly.Limiter.Check(ly.Key, ly.Cost); e.Allowed != c.Allowed || e.RetryAfter != c.RetryAfter || e.Delay != c.Delay {
						t.Fatalf("iter %d step %d layer %d: refused, state %+v, Check %+v", iter, step, i, e, c)
					}
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
	// A nil Limiter refuses with Never; the others still report.
	l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(2), Burst: 3})
	st := make([]hotlimit.LayerState, 2)
	d, idx := hotlimit.AllowLayersState(st, hotlimit.Layer{Limiter: l, Key: "k", Cost: 1}, hotlimit.Layer{Key: "k", Cost: 1})
	if d.Allowed || idx != 1 || st[1].Decision.RetryAfter != hotlimit.Never || st[1].Next != hotlimit.Never || st[0].Decision.Remaining != 3 || !st[0].Decision.Allowed {
		t.Fatalf("nil layer: %+v %d, states %+v", d, idx, st)
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
// and the request is decided on every layer all the same (for 3 layers,
// on the stack, and 10, past it); nil receives nothing and does not
// panic.
func TestAllowLayersStateShort(t *testing.T) {
	for _, n := range []int{3, 10} {
		for _, short := range []int{0, 1, n - 1} {
			build := func() []hotlimit.Layer {
				c := hotlimit.NewManualClock()
				ls := make([]hotlimit.Layer, n)
				for i := range ls {
					ls[i] = hotlimit.Layer{Limiter: newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: int64(2 + i)}, hotlimit.WithClock(c)), Key: "k", Cost: 1}
				}
				return ls
			}
			long, part := build(), build()
			for range 4 { // admitted twice, then refused by the first layer
				want := make([]hotlimit.LayerState, n)
				wd, wi := hotlimit.AllowLayersState(want, long...)
				var got []hotlimit.LayerState
				if short > 0 {
					got = make([]hotlimit.LayerState, short)
				}
				gd, gi := hotlimit.AllowLayersState(got, part...)
				if gd != wd || gi != wi || !slices.Equal(got, want[:short]) {
					t.Fatalf("%d layers, states of %d: %+v %d %+v; want %+v %d %+v", n, short, gd, gi, got, wd, wi, want[:short])
				}
				for i := range long {
					if a, b := long[i].Limiter.Stats(), part[i].Limiter.Stats(); a != b {
						t.Fatalf("%d layers, states of %d: layer %d Stats %+v, want %+v", n, short, i, b, a)
					}
				}
			}
		}
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
