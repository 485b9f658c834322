package hotlimit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
)

// A give-back undoes only its own admission (docs/semantics.md, "Give-backs"): once it
// is given back, a key admits exactly what it would had the admission never
// happened. Each test below runs the same script on two limiters at one
// frozen instant, one of which also makes (and then refunds) the
// admission, and compares how many unit requests each admits after.

// twinDrains runs script on two limiters of policy p on one ManualClock:
// on the first with admit set, on the second with it nil. admit makes an
// admission the script refunds later. It returns how many unit requests
// "k" admits on each at the end, at the clock's final instant.
func twinDrains(t *testing.T, p hotlimit.Policy, script func(l *hotlimit.Limiter, c *hotlimit.ManualClock, admit func())) (with, without int64) {
	t.Helper()
	run := func(make bool) int64 {
		l, c := newManual(t, p)
		var a hotlimit.Admission
		admit := func() {}
		if make {
			admit = func() {
				if d := l.AdmitN(&a, "k", 1); !d.Allowed {
					t.Fatalf("AdmitN refused: %+v", d)
				}
			}
		}
		script(l, c, admit)
		if make && !a.Refund() {
			t.Fatal("Refund did not spend the admission")
		}
		return drain(t, l, "k")
	}
	return run(true), run(false)
}

// TestGiveBackAfterSetPolicySlowerRate: a bucket admission made at
// PerSecond(10) consumed 100 ms of the key's time; after SetPolicy to
// PerSecond(1), which keeps each key's TAT, its give-back must return those
// 100 ms, not the new interval's 1 s, which here also hands back the debt
// of four other admissions.
func TestGiveBackAfterSetPolicySlowerRate(t *testing.T) {
	for name, pp := range map[string][2]hotlimit.Policy{
		"TokenBucket": {hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 5}, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5}},
		"LeakyBucket": {hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 4}, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 4}},
	} {
		t.Run(name, func(t *testing.T) {
			with, without := twinDrains(t, pp[0], func(l *hotlimit.Limiter, c *hotlimit.ManualClock, admit func()) {
				c.Set(time.Hour)
				if d := l.AllowN("k", 4); !d.Allowed {
					t.Fatalf("AllowN(k, 4) refused: %+v", d)
				}
				admit()
				if err := l.SetPolicy(pp[1]); err != nil {
					t.Fatal(err)
				}
			})
			if with != without {
				t.Errorf("after the give-back %q admits %d at the frozen instant; without the admission it admits %d", "k", with, without)
			}
		})
	}
}

// TestGiveBackAfterSetPolicyLongerWindow: a window admission counted in a
// 10 s window that has ended holds nothing any more (its give-back on the
// old policy gives nothing). SetPolicy to a 60 s window moves the key's
// current counts into the new window that holds the admission's instant
// too; the give-back must still give nothing.
func TestGiveBackAfterSetPolicyLongerWindow(t *testing.T) {
	for name, pp := range map[string][2]hotlimit.Policy{
		"FixedWindow":   {hotlimit.FixedWindow{Limit: 5, Window: 10 * time.Second}, hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		"SlidingWindow": {hotlimit.SlidingWindow{Limit: 5, Window: 10 * time.Second}, hotlimit.SlidingWindow{Limit: 5, Window: time.Minute}},
	} {
		t.Run(name, func(t *testing.T) {
			with, without := twinDrains(t, pp[0], func(l *hotlimit.Limiter, c *hotlimit.ManualClock, admit func()) {
				c.Set(time.Hour + 5*time.Second)
				admit()
				c.Set(time.Hour + 25*time.Second) // two old windows later: the admission's count is gone
				for drain(t, l, "k") == 0 {
					t.Fatal("k admitted nothing in a new window")
				}
				if err := l.SetPolicy(pp[1]); err != nil {
					t.Fatal(err)
				}
				c.Set(time.Hour + 59*time.Second)
			})
			if with != without {
				t.Errorf("after the give-back %q admits %d at the frozen instant; without the admission it admits %d", "k", with, without)
			}
		})
	}
}

// TestWaitCancelledAfterSetPolicy: a Wait that reserved a 100 ms slot at
// 10/s and is cancelled after SetPolicy to 1/s gives back those 100 ms,
// leaving the debt of the unit admitted before it (100 ms), not 200 ms
// (its cost at the new rate, which would also give back that unit).
func TestWaitCancelledAfterSetPolicy(t *testing.T) {
	for name, pp := range map[string][2]hotlimit.Policy{
		"TokenBucket": {hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 1}, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}},
		"LeakyBucket": {hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 1}, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, c := newManual(t, pp[0])
				c.Set(time.Hour)
				l.Allow("k")
				ctx, cancel := context.WithCancel(context.Background())
				errc := make(chan error)
				go func() { errc <- l.Wait(ctx, "k", 1) }()
				synctest.Wait() // Wait has reserved its slot and sleeps
				if err := l.SetPolicy(pp[1]); err != nil {
					t.Fatal(err)
				}
				cancel()
				if err := <-errc; !errors.Is(err, context.Canceled) {
					t.Fatalf("Wait = %v, want context.Canceled", err)
				}
				if d := l.Check("k", 0); d.ResetAfter != 100*time.Millisecond {
					t.Errorf("after the cancelled Wait, k's debt is %v, want the 100 ms of the unit admitted before it", d.ResetAfter)
				}
			})
		})
	}
}
