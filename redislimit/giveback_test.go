package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// giveBackPolicies hold 5 units, one unit refilling in 10 ms (buckets) or
// windows of an hour.
var giveBackPolicies = []hotlimit.Policy{
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 5},
	hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 4},
	hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
	hotlimit.SlidingWindow{Limit: 5, Window: time.Hour},
	hotlimit.SlidingLog{Limit: 5, Window: time.Hour},
}

// frozen returns a limiter whose scripts decide at *now (µs).
func frozen(t *testing.T, policy hotlimit.Policy, now *int64) *Limiter {
	t.Helper()
	c := redistest.Client(t, redistest.Addr(t))
	l := must(New(c, "gb", policy, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second)))
	l.testNow = func() int64 { return *now }
	return l
}

// TestGiveBackAfterReset: an admission's give-back after a Reset gives
// nothing to the key's new state: AdmitN(k,2), Reset, AllowN(k,5) and then
// the refund must not let 2 more in (7 against 5), at one instant.
func TestGiveBackAfterReset(t *testing.T) {
	ctx := context.Background()
	for _, policy := range giveBackPolicies {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			now := int64(baseMicros)
			l := frozen(t, policy, &now)
			var a Admission
			if d := must(l.AdmitN(ctx, &a, "k", 2)); !d.Allowed {
				t.Fatalf("first admission: %+v", d)
			}
			if err := l.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if d := must(l.AllowN(ctx, "k", 5)); !d.Allowed {
				t.Fatalf("5 after Reset: %+v", d)
			}
			if ok, err := a.Refund(ctx); err != nil || !ok {
				t.Fatalf("Refund after Reset: %v, %v", ok, err)
			}
			if d := must(l.AllowN(ctx, "k", 2)); d.Allowed {
				t.Fatalf("7 admitted against 5 after the refund: %+v", d)
			}
		})
	}
}

// TestGiveBackAfterRemoval: a give-back that leaves the state fresh
// removes it, so an admission of the removed state gives nothing to the
// next one (a second admission's record outlives the first's refund).
func TestGiveBackAfterRemoval(t *testing.T) {
	ctx := context.Background()
	for _, policy := range giveBackPolicies {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			now := int64(baseMicros)
			l := frozen(t, policy, &now)
			var a, b Admission
			must(l.AdmitN(ctx, &a, "k", 2))
			if ok, _ := a.Refund(ctx); !ok {
				t.Fatal("the first Refund did not spend a")
			}
			if ok, _ := a.Refund(ctx); ok {
				t.Fatal("an Admission was given back twice")
			}
			must(l.AdmitN(ctx, &b, "k", 1))
			if _, err := b.Refund(ctx); err != nil {
				t.Fatal(err)
			}
			if d := must(l.AllowN(ctx, "k", 0)); d.Remaining != 5 {
				t.Fatalf("after both refunds: %+v; want the key full", d)
			}
			// b's refund left the state fresh: removed. a is spent, so
			// replay its record through a copy of its fields.
			c := Admission{l: l, key: "k", inc: b.inc, mark: b.mark, cost: 1}
			if d := must(l.AllowN(ctx, "k", 5)); !d.Allowed {
				t.Fatalf("5 on a fresh key: %+v", d)
			}
			if _, err := c.Refund(ctx); err != nil {
				t.Fatal(err)
			}
			if d := must(l.AllowN(ctx, "k", 1)); d.Allowed {
				t.Fatalf("6 admitted against 5: %+v", d)
			}
		})
	}
}

// TestGiveBackAfterRefill: a bucket's give-back never returns units that
// refilled since its admission. AdmitN(k,2) at t; at t+20 ms the bucket is
// full again and AllowN(k,5) drains it; the refund must not let 2 more in.
// At t+15 ms, 5 ms of it (half a unit) is still owed: after AllowN(k,4)
// the refund lets exactly one more in (two with a bound of cost·T).
func TestGiveBackAfterRefill(t *testing.T) {
	ctx := context.Background()
	for _, policy := range giveBackPolicies[:2] {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			for _, tc := range []struct {
				after time.Duration
				drain int64 // admitted then
				more  int64 // admitted after the refund
			}{{20 * time.Millisecond, 5, 0}, {15 * time.Millisecond, 4, 1}} {
				now := int64(baseMicros)
				l := frozen(t, policy, &now)
				var a Admission
				must(l.AdmitN(ctx, &a, "k", 2))
				now += int64(tc.after / time.Microsecond)
				if d := must(l.AllowN(ctx, "k", tc.drain)); !d.Allowed {
					t.Fatalf("%d after %v: %+v", tc.drain, tc.after, d)
				}
				if _, err := a.Refund(ctx); err != nil {
					t.Fatal(err)
				}
				n := int64(0)
				for must(l.AllowN(ctx, "k", 1)).Allowed {
					n++
				}
				if n != tc.more {
					t.Fatalf("after %v: %d admitted after the refund; want %d", tc.after, n, tc.more)
				}
			}
		})
	}
}

// TestWaitCancelledAfterReset: a Wait whose context ends after its key
// was Reset gives nothing back to the key's new state.
func TestWaitCancelledAfterReset(t *testing.T) {
	for _, policy := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 5},
		hotlimit.LeakyBucket{Rate: hotlimit.PerHour(1), Capacity: 4},
	} {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			now := int64(baseMicros)
			l := frozen(t, policy, &now)
			ctx := context.Background()
			if d := must(l.AllowN(ctx, "k", 5)); !d.Allowed {
				t.Fatal(d)
			}
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- l.Wait(wctx, "k", 2) }()
			// The reservation is taken when the key owes 7 hours.
			redistest.WaitFor(t, "Wait's reservation", func() bool {
				return must(l.AllowN(ctx, "k", 0)).ResetAfter >= 7*time.Hour
			})
			if err := l.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			if d := must(l.AllowN(ctx, "k", 5)); !d.Allowed {
				t.Fatalf("5 after Reset: %+v", d)
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Wait: %v", err)
			}
			if d := must(l.AllowN(ctx, "k", 2)); d.Allowed {
				t.Fatalf("7 admitted against 5 after the cancelled Wait: %+v", d)
			}
		})
	}
}

// TestWaitCancelledGivesBack: without anything in between, a cancelled
// Wait gives its whole reservation back.
func TestWaitCancelledGivesBack(t *testing.T) {
	now := int64(baseMicros)
	l := frozen(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 5}, &now)
	ctx := context.Background()
	must(l.AllowN(ctx, "k", 4))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Wait(wctx, "k", 2) }()
	redistest.WaitFor(t, "Wait's reservation", func() bool {
		return must(l.AllowN(ctx, "k", 0)).ResetAfter >= 6*time.Hour
	})
	cancel()
	<-done
	if d := must(l.AllowN(ctx, "k", 0)); d.Remaining != 1 || d.ResetAfter != 4*time.Hour {
		t.Fatalf("after the cancelled Wait: %+v; want Remaining 1, ResetAfter 4h", d)
	}
}

// TestDifferentialGiveBack runs random traces of admissions recorded on
// both sides, Resets, moving time and give-backs of any earlier admission
// through redislimit and hotlimit on one manual clock: every decision and
// every give-back's result agree, for every policy.
func TestDifferentialGiveBack(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	for pi, policy := range policiesForDiff {
		t.Run(fmt.Sprintf("%d_%T", pi, policy), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(pi), 7))
			clock := hotlimit.NewManualClock()
			clock.Set(baseMicros * time.Microsecond)
			p := newPair(t, c, clock, "giveback", redistest.Prefix(t), policy)
			limit, per := p.remote.spec.limit, period(policy)
			type pair struct {
				local  *hotlimit.Admission
				remote *Admission
			}
			var held []pair
			for step := range 300 {
				switch r := rng.IntN(10); {
				case r < 2:
					clock.Advance(time.Duration(rng.Int64N(per/3+1)) * time.Microsecond)
				case r < 3 && step%5 == 0:
					p.local.Reset("k")
					if err := p.remote.Reset(ctx, "k"); err != nil {
						t.Fatal(err)
					}
				case r < 6 && len(held) > 0:
					i := rng.IntN(len(held)) // in any order: renewals replay (ops.lua)
					h := held[i]
					held = append(held[:i], held[i+1:]...)
					want := h.local.Refund()
					got, err := h.remote.Refund(ctx)
					if err != nil || got != want {
						t.Fatalf("step %d: Refund %v (%v), hotlimit's %v", step, got, err, want)
					}
				default:
					cost := 1 + rng.Int64N(min(limit, 3))
					h := pair{new(hotlimit.Admission), new(Admission)}
					want := p.local.AdmitN(h.local, "k", cost)
					got, err := p.remote.AdmitN(ctx, h.remote, "k", cost)
					if err != nil {
						t.Fatal(err)
					}
					if !sameDecision(want, got) {
						t.Fatalf("step %d, cost %d:\n local %+v\n redis %+v", step, cost, want, got)
					}
					if want.Allowed {
						held = append(held, h)
					}
				}
				want := p.local.AllowN("k", 0)
				got := must(p.remote.AllowN(ctx, "k", 0))
				if !sameDecision(want, got) {
					t.Fatalf("step %d, peek:\n local %+v\n redis %+v", step, want, got)
				}
			}
		})
	}
}

// TestRefundOnce: concurrent Refunds of one Admission give it back once:
// exactly one reports that it spent it, and the key owes the admission's
// cost once, not twice.
func TestRefundOnce(t *testing.T) {
	now := int64(baseMicros)
	l := frozen(t, hotlimit.FixedWindow{Limit: 10, Window: time.Hour}, &now)
	ctx := context.Background()
	must(l.AllowN(ctx, "k", 4))
	var a Admission
	must(l.AdmitN(ctx, &a, "k", 3))
	var spent atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if ok, err := a.Refund(ctx); err != nil {
				t.Error(err)
			} else if ok {
				spent.Add(1)
			}
		})
	}
	wg.Wait()
	if n := spent.Load(); n != 1 {
		t.Fatalf("%d Refunds spent the Admission; want 1", n)
	}
	if d := must(l.AllowN(ctx, "k", 0)); d.Remaining != 6 {
		t.Fatalf("after the refunds: Remaining %d; want 6 (4 still count)", d.Remaining)
	}
}

// TestGiveBackBelowTheTop: a bucket give-back of an admission that later
// ones sit above moves their units down, so their records must not give
// back by their own TAT: A and B take 2 each of a burst of 4, A is given
// back, the bucket refills, C takes all 4, and B's give-back must not let
// 2 more in (6 against 4 at one instant).
func TestGiveBackBelowTheTop(t *testing.T) {
	ctx := context.Background()
	for _, policy := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 4},
		hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3},
	} {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			now := int64(baseMicros)
			l := frozen(t, policy, &now)
			var a, b, c Admission
			must(l.AdmitN(ctx, &a, "k", 2))
			must(l.AdmitN(ctx, &b, "k", 2))
			must(a.Refund(ctx))
			now += 200_000
			if d := must(l.AdmitN(ctx, &c, "k", 4)); !d.Allowed {
				t.Fatalf("C: %+v", d)
			}
			must(b.Refund(ctx))
			n := 0
			for must(l.AllowN(ctx, "k", 1)).Allowed {
				n++
			}
			if n > 0 {
				t.Fatalf("%d more at one instant after C drained the bucket: %d against 4", n, 4+n)
			}
		})
	}
}
