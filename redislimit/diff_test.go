package redislimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The differential tests run the same traces through the script (deciding
// at the instants the test passes instead of the server's TIME) and
// through hotlimit's in-process limiter on a ManualClock, and require the
// same decisions: Allowed and Remaining exactly, RetryAfter and ResetAfter
// to the microsecond (the script works in whole microseconds and rounds a
// duration up, towards denying; the in-process limiter works in ns).

// baseMicros is a realistic Unix time in µs, so the traces exercise the
// magnitudes the server's TIME gives (about 2^50.6).
const baseMicros = 1_764_000_000_123_457

// ceilMicro rounds d up to a whole microsecond; Never stays Never.
func ceilMicro(d time.Duration) time.Duration {
	if d == hotlimit.Never || d <= 0 {
		return d
	}
	return (d + time.Microsecond - 1) / time.Microsecond * time.Microsecond
}

func sameDecision(want, got hotlimit.Decision) bool {
	return want.Allowed == got.Allowed && want.Limit == got.Limit && want.Remaining == got.Remaining &&
		ceilMicro(want.RetryAfter) == got.RetryAfter && ceilMicro(want.ResetAfter) == got.ResetAfter &&
		ceilMicro(want.Delay) == got.Delay
}

// pair is one policy run both ways on one clock.
type pair struct {
	local  *hotlimit.Limiter
	remote *Limiter
}

func newPair(t *testing.T, c redis.Scripter, clock *hotlimit.ManualClock, name, prefix string, policy hotlimit.Policy) pair {
	t.Helper()
	local := must(hotlimit.New(policy, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)))
	t.Cleanup(func() { local.Close() })
	remote := must(New(c, name, policy, WithPrefix(prefix), WithTimeout(5*time.Second)))
	remote.testNow = func() int64 { return int64(clock.Now() / time.Microsecond) }
	return pair{local, remote}
}

// policiesForDiff have emission intervals and windows in whole µs, so the
// two implementations agree exactly.
var policiesForDiff = []hotlimit.Policy{
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 3},
	hotlimit.TokenBucket{Rate: hotlimit.PerMinute(6), Burst: 5},
	hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 8, Per: time.Millisecond}, Burst: 40},
	hotlimit.TokenBucket{Rate: hotlimit.PerHour(1000), Burst: 1_000_000},
	hotlimit.FixedWindow{Limit: 5, Window: time.Second},
	hotlimit.FixedWindow{Limit: 3, Window: 250 * time.Millisecond},
	hotlimit.FixedWindow{Limit: 1_000_000, Window: 24 * time.Hour},
	hotlimit.SlidingWindow{Limit: 5, Window: time.Second},
	hotlimit.SlidingWindow{Limit: 7, Window: 3 * time.Millisecond},
	hotlimit.SlidingWindow{Limit: 1000, Window: 24 * time.Hour},
	// p·(W−e) + (q+c)·W reaches 8.64e16 > 2^53 here: only exact
	// arithmetic in the script agrees with hotlimit's 128-bit one.
	hotlimit.SlidingWindow{Limit: 1_000_000, Window: 24 * time.Hour},
	hotlimit.SlidingWindow{Limit: 999_983, Window: 24*time.Hour - time.Microsecond},
	hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3},
	hotlimit.LeakyBucket{Rate: hotlimit.PerMinute(6), Capacity: 0},
	hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 8, Per: time.Millisecond}, Capacity: 40},
	hotlimit.SlidingLog{Limit: 5, Window: time.Second},
	hotlimit.SlidingLog{Limit: 1, Window: 250 * time.Millisecond},
	hotlimit.SlidingLog{Limit: 100, Window: 3 * time.Millisecond},
	hotlimit.SlidingLog{Limit: 1024, Window: 24 * time.Hour},
}

// period returns the policy's natural time scale, in µs.
func period(policy hotlimit.Policy) int64 {
	sp, _ := newSpec(policy)
	if sp.kind == kindTokenBucket {
		return sp.tau
	}
	return sp.a
}

func TestDifferentialSingle(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	for pi, policy := range policiesForDiff {
		t.Run(fmt.Sprintf("%d_%T", pi, policy), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(pi), 42))
			clock := hotlimit.NewManualClock()
			clock.Set(baseMicros * time.Microsecond)
			p := newPair(t, c, clock, "diff", redistest.Prefix(t), policy)
			limit := p.remote.spec.limit
			per := period(policy)
			for step := range 300 {
				switch r := rng.IntN(11); {
				case r == 10:
					// The server's clock stepped back (a failover to a
					// replica whose clock is behind): no time has passed.
					clock.Advance(-time.Duration(rng.Int64N(per+1)) * time.Microsecond)
				case r < 4: // same instant
				case r < 7:
					clock.Advance(time.Duration(rng.Int64N(per+1)) * time.Microsecond)
				case r < 9:
					clock.Advance(time.Duration(rng.Int64N(3*per+1)) * time.Microsecond)
				default:
					clock.Advance(time.Duration(rng.Int64N(1_000_000)) * time.Microsecond)
				}
				key := []string{"a", "b"}[rng.IntN(2)]
				var cost int64
				switch r := rng.IntN(20); {
				case r == 0:
					cost = -1
				case r == 1:
					cost = limit + 1
				case r == 2:
					cost = 0
				case r < 6:
					cost = 1 + rng.Int64N(limit)
				default:
					cost = 1 + rng.Int64N(min(limit, 3))
				}
				want := p.local.AllowN(key, cost)
				got, err := p.remote.AllowN(ctx, key, cost)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !sameDecision(want, got) {
					t.Fatalf("step %d at %dµs, key %q cost %d:\n local %+v\n redis %+v", step, clock.Now()/time.Microsecond, key, cost, want, got)
				}
			}
		})
	}
}

func TestDifferentialLayers(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	// Seeds 6 to 8 draw buckets only: the script's fast path for layers
	// of buckets on distinct keys; seeds 9 to 11 fixed windows only, its
	// fast path for those (windows.lua: every window and limit is in the
	// packed range); seeds 12 to 15 fixed windows in and out of that range
	// (a Limit of 2^20, a window whose index passes 2^32) with costs up to
	// and past the limit. The clock only moves forward here: see
	// TestWindowsClockSetBack and the package doc ("The server's clock")
	// for a clock set back.
	for seed := range 16 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			clock := hotlimit.NewManualClock()
			clock.Set(baseMicros * time.Microsecond)
			prefix := redistest.Prefix(t)
			ps := []pair{
				newPair(t, c, clock, "tb", prefix, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(5), Burst: 4}),
				newPair(t, c, clock, "fw", prefix, hotlimit.FixedWindow{Limit: 6, Window: 2 * time.Second}),
				newPair(t, c, clock, "sw", prefix, hotlimit.SlidingWindow{Limit: 7, Window: 3 * time.Second}),
				newPair(t, c, clock, "lb", prefix, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(4), Capacity: 2}),
				newPair(t, c, clock, "sl", prefix, hotlimit.SlidingLog{Limit: 5, Window: 2 * time.Second}),
			}
			windows := seed >= 9
			edges := seed >= 12
			switch {
			case edges:
				ps = []pair{ps[1],
					newPair(t, c, clock, "fwmax", prefix, hotlimit.FixedWindow{Limit: 1<<20 - 1, Window: time.Second}),
					newPair(t, c, clock, "fwbig", prefix, hotlimit.FixedWindow{Limit: 1 << 20, Window: 3 * time.Second}),
					newPair(t, c, clock, "fwshort", prefix, hotlimit.FixedWindow{Limit: 4, Window: 250 * time.Millisecond}),
					newPair(t, c, clock, "fw3", prefix, hotlimit.FixedWindow{Limit: 1, Window: 5 * time.Second})}
			case windows:
				ps = []pair{ps[1],
					newPair(t, c, clock, "fw2", prefix, hotlimit.FixedWindow{Limit: 3, Window: 700 * time.Millisecond}),
					newPair(t, c, clock, "fw3", prefix, hotlimit.FixedWindow{Limit: 1, Window: 5 * time.Second})}
			case seed >= 6:
				ps = []pair{ps[0], ps[3], newPair(t, c, clock, "tb2", prefix, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(8), Burst: 2})}
			}
			keys := []string{"x", "y", "z"}
			for step := range 300 {
				if rng.IntN(3) == 0 {
					clock.Advance(time.Duration(rng.Int64N(1_500_000)) * time.Microsecond)
				}
				n := 1 + rng.IntN(3)
				var local []hotlimit.Layer
				var remote []Layer
				for range n {
					p := ps[rng.IntN(len(ps))]
					key := keys[rng.IntN(len(keys))]
					cost := rng.Int64N(4)
					switch r := rng.IntN(25); {
					case r == 0:
						cost = -1
					case r == 1 && edges:
						cost = p.remote.spec.limit + rng.Int64N(2) // the whole limit, or above it
					case r == 2 && edges:
						cost = p.remote.spec.limit - rng.Int64N(3)
					}
					local = append(local, hotlimit.Layer{Limiter: p.local, Key: key, Cost: cost})
					remote = append(remote, Layer{Limiter: p.remote, Key: key, Cost: cost})
				}
				// Half the calls also ask for each layer's state.
				var states []hotlimit.LayerState
				if rng.IntN(2) == 0 {
					states = make([]hotlimit.LayerState, n)
				}
				each := make([]hotlimit.LayerState, n)
				want, wantIdx := hotlimit.AllowLayersState(each, local...)
				got, gotIdx, err := allowLayers(ctx, remote, states)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if !sameDecision(want, got) || gotIdx != wantIdx {
					t.Fatalf("step %d, layers %v:\n local %+v, binding %d\n redis %+v, binding %d", step, describe(remote), want, wantIdx, got, gotIdx)
				}
				for j := range states {
					if w := wantState(local, j, each[j].Decision); states[j].Decision.Remaining != w.Decision.Remaining ||
						w.Next >= 0 && states[j].Next != w.Next {
						t.Fatalf("step %d, layers %v, layer %d's state:\n local %+v (Window -1: not compared)\n redis %+v", step, describe(remote), j, w, states[j])
					}
				}
			}
		})
	}
}

// wantState is layer j's state as admission.Local reports it, from its
// own Decision c and, after the call, Check(key, Remaining+1), the wait
// for its next unit (to the µs, as the script gives it): nothing to wait
// for when the layer is full. For a key that appears in another layer of
// the call with the same limiter, Check reads the state after both, not
// after layer j alone: its Next is -1, not to be compared.
func wantState(ls []hotlimit.Layer, j int, c hotlimit.Decision) hotlimit.LayerState {
	ly := ls[j]
	if c.Remaining >= c.Limit {
		return hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: c.Remaining}}
	}
	for k, o := range ls {
		if k != j && o.Limiter == ly.Limiter && o.Key == ly.Key {
			return hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: c.Remaining}, Next: -1}
		}
	}
	return hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: c.Remaining}, Next: ceilMicro(ly.Limiter.Check(ly.Key, c.Remaining+1).RetryAfter)}
}

func describe(ls []Layer) []string {
	var out []string
	for _, ly := range ls {
		out = append(out, fmt.Sprintf("%s/%s/%d", ly.Limiter.name, ly.Key, ly.Cost))
	}
	return out
}

// TestDifferentialPrecision replays the instants where doubles get the
// sliding window wrong: p·(W−e) and room·W above 2^53, whose rounded
// quotient lands on the wrong side of an integer (found by searching for
// p, e with ceil(fl(p·(W−e))/W) ≠ ⌈p·(W−e)/W⌉). Only exact arithmetic
// agrees with hotlimit here.
func TestDifferentialPrecision(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	const W = int64(24 * time.Hour / time.Microsecond)
	start := (baseMicros/W + 1) * W // the start of a window
	cases := []struct {
		name  string
		prev  int64 // admitted at the start of the first window
		e     int64 // elapsed into the next window
		costs []int64
	}{
		// ⌈p(W−e)/W⌉ = 495273 exactly; doubles give 495272.
		{name: "used", prev: 519707, e: 4062258157, costs: []int64{0, 504728, 504727, 1}},
		{name: "used2", prev: 998926, e: 67012358473, costs: []int64{0, 775847, 775846, 0}},
		// RetryAfter's ⌊room·W/p⌋ = 86018923992 exactly; doubles give
		// one more.
		{name: "retry", prev: 533714, e: 1, costs: []int64{468640, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := hotlimit.NewManualClock()
			clock.Set(time.Duration(start) * time.Microsecond)
			p := newPair(t, c, clock, "prec", redistest.Prefix(t), hotlimit.SlidingWindow{Limit: 1_000_000, Window: 24 * time.Hour})
			check := func(cost int64) hotlimit.Decision {
				t.Helper()
				want := p.local.AllowN("k", cost)
				got, err := p.remote.AllowN(context.Background(), "k", cost)
				if err != nil {
					t.Fatal(err)
				}
				if !sameDecision(want, got) {
					t.Fatalf("cost %d at e=%d:\n local %+v\n redis %+v", cost, tc.e, want, got)
				}
				return got
			}
			if !check(tc.prev).Allowed {
				t.Fatal("setup: the first window's cost was denied")
			}
			clock.Set(time.Duration(start+W+tc.e) * time.Microsecond)
			for _, cost := range tc.costs {
				check(cost)
			}
		})
	}
}
