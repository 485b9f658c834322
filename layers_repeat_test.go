package hotlimit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestAllowLayersNone: a request checked against no limit is refused, for
// ever, and binds no layer.
func TestAllowLayersNone(t *testing.T) {
	if d := hotlimit.AllowLayers(); d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Fatalf("AllowLayers(): %+v; want denied with RetryAfter Never", d)
	}
	if d, i := hotlimit.AllowLayersState(nil); d.Allowed || d.RetryAfter != hotlimit.Never || i != -1 {
		t.Fatalf("AllowLayersState(nil): %+v, index %d; want denied with Never, index -1", d, i)
	}
}

// TestAllowLayersRepeated: one limiter and one key in two layers are one
// limit, decided for the two costs together. Refused, the Decision and
// each layer's report the key's state after the call, not the state in
// which the first layer still held its units.
func TestAllowLayersRepeated(t *testing.T) {
	l, clk := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 6})
	l.AllowN("k", 3) // 3 left; full again in 30 ms
	st := make([]hotlimit.LayerState, 2)
	req := []hotlimit.Layer{{Limiter: l, Key: "k", Cost: 2}, {Limiter: l, Key: "k", Cost: 2}}
	d, _ := hotlimit.AllowLayersState(st, req...)
	want := hotlimit.Decision{Limit: 6, Remaining: 3, RetryAfter: 10 * time.Millisecond, ResetAfter: 30 * time.Millisecond}
	if d != want || st[0].Decision != want || st[1].Decision != want {
		t.Fatalf("refused: %+v, states %+v; want %+v for every one", d, st, want)
	}
	clk.Advance(d.RetryAfter)
	if d, _ := hotlimit.AllowLayersState(st, req...); !d.Allowed || d.Remaining != 0 || st[0].Decision != d || st[1].Decision != d {
		t.Fatalf("retried after RetryAfter: %+v, states %+v; want admitted with Remaining 0 by both", d, st)
	}
}

// TestAllowLayersRepeatedRetryAfter: for every policy, random states and
// layered requests in which limiters and keys repeat, a refused request's
// RetryAfter is exact: the same request is refused 1 ns before it and
// admitted at it (nothing else consumes meanwhile). Each layer's report
// is its state after the call, and the accounting is all or nothing.
func TestAllowLayersRepeatedRetryAfter(t *testing.T) {
	policies := []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(2), Burst: 5},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 4},
		hotlimit.FixedWindow{Limit: 5, Window: 3 * time.Second},
		hotlimit.SlidingWindow{Limit: 10, Window: 60 * time.Second},
		hotlimit.SlidingLog{Limit: 5, Window: 2 * time.Second},
	}
	rng := rand.New(rand.NewPCG(22, 7))
	for iter := range 300 {
		p := policies[iter%len(policies)]
		l, clk := newManual(t, p)
		other, _ := newManual(t, hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}, hotlimit.WithClock(clk))
		for range rng.IntN(6) { // some history
			clk.Advance(time.Duration(rng.IntN(4000)) * time.Millisecond)
			l.AllowN("k", int64(1+rng.IntN(3)))
		}
		req := []hotlimit.Layer{{Limiter: l, Key: "k", Cost: int64(1 + rng.IntN(3))}}
		if rng.IntN(2) == 0 {
			req = append(req, hotlimit.Layer{Limiter: other, Key: "k", Cost: 1})
		}
		req = append(req, hotlimit.Layer{Limiter: l, Key: "k", Cost: int64(1 + rng.IntN(3))})
		rng.Shuffle(len(req), func(i, j int) { req[i], req[j] = req[j], req[i] })
		total := int64(0)
		for _, ly := range req {
			if ly.Limiter == l {
				total += ly.Cost
			}
		}
		each := make([]hotlimit.LayerState, len(req))
		d, _ := hotlimit.AllowLayersState(each, req...)
		if d.Allowed {
			continue
		}
		for i, ly := range req {
			if ly.Limiter != l {
				continue
			}
			st := l.Check("k", total)
			if e := each[i].Decision; e.Remaining != st.Remaining || e.ResetAfter != st.ResetAfter || e.RetryAfter != st.RetryAfter {
				t.Fatalf("iter %d (%T): layer %d reports %+v; the key's state after the call, for the cost %d: %+v", iter, p, i, e, total, st)
			}
		}
		if d.RetryAfter == hotlimit.Never {
			if total <= l.Limit() {
				t.Fatalf("iter %d (%T): refused with Never, but the cost %d fits in %d", iter, p, total, l.Limit())
			}
			continue
		}
		clk.Advance(d.RetryAfter - 1)
		if e := hotlimit.AllowLayers(req...); e.Allowed {
			t.Fatalf("iter %d (%T): refused %+v, then admitted 1 ns before its RetryAfter", iter, p, d)
		}
		clk.Advance(1)
		if e := hotlimit.AllowLayers(req...); !e.Allowed {
			t.Fatalf("iter %d (%T): refused %+v, and again at its RetryAfter: %+v", iter, p, d, e)
		}
	}
}
