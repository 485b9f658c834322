package hotlimit_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestAllowLayersEach runs random layered requests through AllowLayersEach
// and, on a twin set of limiters, AllowLayersIndex: the two agree on the
// Decision and the binding layer, and each[i] is layer i's own view after
// the call: its Limit, its state's Remaining and ResetAfter, and, when the
// request was refused, what Check of its cost says now.
func TestAllowLayersEach(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := range 40 {
		ls, twin, clocks := twinLayers(t, rng)
		n := len(ls)
		each := make([]hotlimit.Decision, n+2) // room to spare is allowed
		for step := range 30 {
			d, idx := hotlimit.AllowLayersEach(each, ls...)
			wd, widx := hotlimit.AllowLayersIndex(twin...)
			if d != wd || idx != widx {
				t.Fatalf("iter %d step %d: Each %+v %d, Index %+v %d", iter, step, d, idx, wd, widx)
			}
			for i, ly := range ls {
				e, now := each[i], ly.Limiter.Check(ly.Key, 0)
				if e.Limit != ly.Limiter.Limit() || e.Remaining != now.Remaining || e.ResetAfter != now.ResetAfter {
					t.Fatalf("iter %d step %d layer %d: each %+v, state now %+v", iter, step, i, e, now)
				}
				if d.Allowed != e.Allowed && d.Allowed {
					t.Fatalf("iter %d step %d layer %d: admitted, each %+v", iter, step, i, e)
				}
				if !d.Allowed {
					if c := ly.Limiter.Check(ly.Key, ly.Cost); e.Allowed != c.Allowed || e.RetryAfter != c.RetryAfter || e.Delay != c.Delay {
						t.Fatalf("iter %d step %d layer %d: refused, each %+v, Check %+v", iter, step, i, e, c)
					}
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
	each := make([]hotlimit.Decision, 2)
	d, idx := hotlimit.AllowLayersEach(each, hotlimit.Layer{Limiter: l, Key: "k", Cost: 1}, hotlimit.Layer{Key: "k", Cost: 1})
	if d.Allowed || idx != 1 || each[1].RetryAfter != hotlimit.Never || each[0].Remaining != 3 || !each[0].Allowed {
		t.Fatalf("nil layer: %+v %d, each %+v", d, idx, each)
	}
}

// TestAllowLayersEachShort: an each shorter than the layers receives the
// first layers' Decisions, exactly those a long enough each receives, and
// the request is decided on every layer all the same (for 3 layers, on
// the stack, and 10, past it); nil receives nothing and does not panic.
func TestAllowLayersEachShort(t *testing.T) {
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
				want := make([]hotlimit.Decision, n)
				wd, wi := hotlimit.AllowLayersEach(want, long...)
				var got []hotlimit.Decision
				if short > 0 {
					got = make([]hotlimit.Decision, short)
				}
				gd, gi := hotlimit.AllowLayersEach(got, part...)
				if gd != wd || gi != wi || !slices.Equal(got, want[:short]) {
					t.Fatalf("%d layers, each of %d: %+v %d %+v; want %+v %d %+v", n, short, gd, gi, got, wd, wi, want[:short])
				}
				for i := range long {
					if a, b := long[i].Limiter.Stats(), part[i].Limiter.Stats(); a != b {
						t.Fatalf("%d layers, each of %d: layer %d Stats %+v, want %+v", n, short, i, b, a)
					}
				}
			}
		}
	}
}
