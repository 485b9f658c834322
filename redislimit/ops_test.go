package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestDifferentialRefund runs traces of decisions and refunds through the
// script and hotlimit's limiter on one manual clock: every decision after
// a refund must agree, so the refund gave back exactly what hotlimit's
// does, for every policy. Each refund gives back an admission made at the
// same instant, through each side's Admission.
func TestDifferentialRefund(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	for pi, policy := range policiesForDiff {
		t.Run(fmt.Sprintf("%d_%T", pi, policy), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(pi), 99))
			clock := hotlimit.NewManualClock()
			clock.Set(baseMicros * time.Microsecond)
			p := newPair(t, c, clock, "refund", redistest.Prefix(t), policy)
			limit, per := p.remote.spec.limit, period(policy)
			for step := range 200 {
				if rng.IntN(3) == 0 {
					clock.Advance(time.Duration(rng.Int64N(per/2+1)) * time.Microsecond)
				}
				cost := 1 + rng.Int64N(min(limit, 3))
				if rng.IntN(3) == 0 {
					var a hotlimit.Admission
					var ra Admission
					want := p.local.AdmitN(&a, "k", cost)
					got, err := p.remote.AdmitN(ctx, &ra, "k", cost)
					if err != nil {
						t.Fatal(err)
					}
					if !sameDecision(want, got) {
						t.Fatalf("step %d, cost %d before a refund:\n local %+v\n redis %+v", step, cost, want, got)
					}
					if want.Allowed {
						gave := a.Refund()
						if rgave, err := ra.Refund(ctx); err != nil || rgave != gave {
							t.Fatalf("step %d: Refund gave %v (%v), hotlimit's %v", step, rgave, err, gave)
						}
					}
					cost = 0 // look at the state the refund left
				}
				want := p.local.AllowN("k", cost)
				got, err := p.remote.AllowN(ctx, "k", cost)
				if err != nil {
					t.Fatal(err)
				}
				if !sameDecision(want, got) {
					t.Fatalf("step %d, cost %d:\n local %+v\n redis %+v", step, cost, want, got)
				}
			}
		})
	}
}

// TestReset: Reset makes a key fresh in Redis and drops this instance's
// cached denial of it; other keys keep their state.
func TestReset(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var sent redistest.Counter
	c.AddHook(&sent)
	ctx := context.Background()
	for _, policy := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 2},
		hotlimit.SlidingLog{Limit: 2, Window: time.Hour},
		hotlimit.SlidingWindow{Limit: 2, Window: time.Hour},
	} {
		l := must(New(c, "reset", policy, WithPrefix(redistest.Prefix(t)), WithLocalDenials(10)))
		for _, k := range []string{"k", "other"} {
			must(l.AllowN(ctx, k, 2))
		}
		if d := must(l.Allow(ctx, "k")); d.Allowed {
			t.Fatalf("%T: empty key admitted", policy)
		}
		if err := l.Reset(ctx, "k"); err != nil {
			t.Fatal(err)
		}
		before := sent.N()
		if d := must(l.AllowN(ctx, "k", 2)); !d.Allowed || sent.N() != before+1 {
			t.Fatalf("%T: after Reset: %+v (%d commands); want a fresh key decided by Redis", policy, d, sent.N()-before)
		}
		if d := must(l.Allow(ctx, "other")); d.Allowed {
			t.Fatalf("%T: Reset of k changed another key: %+v", policy, d)
		}
	}
}

// TestReserve checks Wait's reservation in Redis step by step at fixed
// instants: the token bucket's slot is when the request fits, the leaky
// bucket's the start of its turn; a wait longer than accepted takes
// nothing.
func TestReserve(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	const ms = 1000 // µs
	for _, tc := range []struct {
		policy hotlimit.Policy
		steps  [][3]int64 // cost, max wait (µs), want wait (µs; -1: refused)
	}{
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 2}, [][3]int64{
			{1, 0, 0}, {1, 0, 0}, {1, 99 * ms, -1}, {1, 100 * ms, 100 * ms}, {2, 1 << 40, 300 * ms}, {1, 1 << 40, 400 * ms}}},
		{hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 1}, [][3]int64{
			{1, 0, 0}, {1, 100 * ms, 100 * ms}, {1, 199 * ms, -1}, {1, 200 * ms, 200 * ms}, {2, 1 << 40, 300 * ms}}},
	} {
		clock := hotlimit.NewManualClock()
		clock.Set(baseMicros * time.Microsecond)
		p := newPair(t, c, clock, "reserve", redistest.Prefix(t), tc.policy)
		for i, st := range tc.steps {
			r, err := p.remote.op(ctx, "reserve", "k", st[0], st[1])
			if err != nil {
				t.Fatal(err)
			}
			got := r[1]
			if r[0] == 0 {
				got = -1
			}
			if got != st[2] {
				t.Fatalf("%T step %d (cost %d, max wait %dµs): wait %dµs (reply %v), want %d", tc.policy, i, st[0], st[1], got, r, st[2])
			}
		}
	}
}

// TestWait: Wait returns once admitted and consumes the slot; a deadline
// before the slot fails at once with ErrDeadline, consuming nothing; a
// context that ends while it sleeps gives the slot back.
func TestWait(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	quick := must(New(c, "quick", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 20 * time.Millisecond}, Burst: 1}, WithPrefix(prefix)))
	// Its scripts decide at one instant (µs), and Wait still sleeps the
	// 20ms it is told to in real time. Whether Wait kept its slot is read
	// off the TAT, which no later reading of the server's clock can make
	// look refilled: the Allow leaves it one slot past now, a Wait that
	// keeps its slot two. (A second Allow on the server's clock was denied
	// only if it came within 20ms, which a loaded machine does not keep.)
	now := int64(time.Hour / time.Microsecond)
	quick.testNow = func() int64 { return now }
	must(quick.Allow(ctx, "k"))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := quick.Wait(wctx, "k", 1); err != nil {
		t.Fatalf("Wait on a 20ms slot: %v", err)
	}
	if got, want := c.Get(ctx, quick.RedisKey("k")).Val(), strconv.FormatInt(now+40_000, 10); got != want {
		t.Fatalf("TAT after Allow and Wait: %s µs; want %s (Wait did not keep its slot)", got, want)
	}

	slow := must(New(c, "slow", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, WithPrefix(prefix)))
	must(slow.Allow(ctx, "k"))
	tat := func() string { return c.Get(ctx, slow.RedisKey("k")).Val() }
	before := tat()
	dctx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if err := slow.Wait(dctx, "k", 1); !errors.Is(err, hotlimit.ErrDeadline) {
		t.Fatalf("Wait with a deadline before the slot: %v; want ErrDeadline", err)
	}
	if tat() != before {
		t.Fatal("a refused Wait consumed")
	}
	cctx, cancel3 := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- slow.Wait(cctx, "k", 1) }()
	redistest.WaitFor(t, "the reservation", func() bool { return tat() != before })
	cancel3()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait whose context ended: %v", err)
	}
	if tat() != before {
		t.Fatal("a cancelled Wait kept its slot")
	}
	if err := slow.Wait(ctx, "k", 2); !errors.Is(err, hotlimit.ErrInvalidCost) {
		t.Fatalf("cost above Burst: %v", err)
	}

	win := must(New(c, "win", hotlimit.FixedWindow{Limit: 1, Window: 20 * time.Millisecond}, WithPrefix(prefix)))
	must(win.Allow(ctx, "k"))
	if err := win.Wait(wctx, "k", 1); err != nil {
		t.Fatalf("Wait on a window: %v", err)
	}
}

// TestWaitFailurePolicy: when Redis cannot decide, Wait answers as the
// failure policy says: FailOpen returns at once, a Fallback waits on its
// in-process limiter, FailClosed returns the error.
func TestWaitFailurePolicy(t *testing.T) {
	c := redistest.Client(t, "127.0.0.1:1") // nothing listens there
	ctx := context.Background()
	p := hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}
	open := must(New(c, "wo", p, WithFailOpen()))
	closed := must(New(c, "wc", p))
	fb := must(New(c, "wf", p, WithFallbackLocal()))
	defer fb.Close()
	if err := open.Wait(ctx, "k", 1); err != nil {
		t.Fatalf("FailOpen: %v", err)
	}
	if err := closed.Wait(ctx, "k", 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("FailClosed: %v; want ErrUnavailable", err)
	}
	if err := fb.Wait(ctx, "k", 1); err != nil {
		t.Fatalf("Fallback, first: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := fb.Wait(dctx, "k", 1); !errors.Is(err, hotlimit.ErrDeadline) {
		t.Fatalf("Fallback, second (the local bucket is empty for an hour): %v; want ErrDeadline", err)
	}
}
