package hotlimit_test

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// agrees checks that what Check reports for key at the clock's reading is
// what the key then admits there: Remaining unit requests, then a denial
// (want is the Remaining that is right). It consumes the key's units.
func agrees(t *testing.T, l *hotlimit.Limiter, key string, want int64) {
	t.Helper()
	if d := l.Check(key, 0); d.Remaining != want {
		t.Errorf("Check(%q, 0).Remaining = %d, want %d", key, d.Remaining, want)
	}
	for i := int64(0); i < want; i++ {
		d := l.Allow(key)
		if !d.Allowed {
			t.Fatalf("%q admitted %d unit requests, then refused (%+v); Check said %d", key, i, d, want)
		}
		if d.Remaining != want-i-1 {
			t.Errorf("admission %d of %q reports Remaining %d, want %d", i+1, key, d.Remaining, want-i-1)
		}
	}
	if d := l.Allow(key); d.Allowed {
		t.Errorf("%q admitted a unit more than the %d Check reported", key, want)
	}
}

// TestSetBackLayersGiveBack: AllowLayers refused by its second layer gives
// the first layer's admission back while the ManualClock has been set
// forward and back again, with no limiter call in between. The give-back
// must leave the token bucket where its three standing admissions put it
// (TAT 36 min ahead: 2 units left of 5 at 12 min each), not judge it at
// the clock's later reading, where it looked fresh and was removed (Check
// then said 5 and Allow admitted 1).
func TestSetBackLayersGiveBack(t *testing.T) {
	clk := hotlimit.NewManualClock()
	now := 1000*time.Hour + 10*time.Minute
	clk.Set(now)
	tb := newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(5), Burst: 5}, hotlimit.WithClock(clk))
	fw := newLimiter(t, hotlimit.FixedWindow{Limit: 3, Window: time.Hour}, hotlimit.WithClock(clk))
	for i := range 4 {
		d := hotlimit.AllowLayers(hotlimit.Layer{Limiter: tb, Key: "a", Cost: 1}, hotlimit.Layer{Limiter: fw, Key: "b", Cost: 1})
		if d.Allowed != (i < 3) {
			t.Fatalf("request %d: Allowed %v", i, d.Allowed)
		}
		clk.Set(now + 40*time.Minute)
		clk.Set(now)
	}
	if n := tb.Len(); n != 1 {
		t.Errorf("Len %d after the give-back, want 1: the key owes 36 min", n)
	}
	agrees(t, tb, "a", 2)
}

// TestSetBackRefund: three AdmitN, a look-ahead (the clock set forward and
// back), then a Refund of the last: the key must hold the other two,
// Check and Allow agreeing on the 3 units left, on both buckets. A Refund
// of the first, below the later two, must give back its units too: the
// look-ahead read nothing.
func TestSetBackRefund(t *testing.T) {
	for name, p := range map[string]hotlimit.Policy{
		"TokenBucket": hotlimit.TokenBucket{Rate: hotlimit.PerHour(5), Burst: 5},
		"LeakyBucket": hotlimit.LeakyBucket{Rate: hotlimit.PerHour(5), Capacity: 4},
	} {
		for _, which := range []int{2, 0} {
			t.Run(name, func(t *testing.T) {
				l, clk := newManual(t, p)
				now := 1000*time.Hour + 10*time.Minute
				clk.Set(now)
				var a [3]hotlimit.Admission
				for i := range a {
					if d := l.AdmitN(&a[i], "k", 1); !d.Allowed {
						t.Fatalf("AdmitN %d refused: %+v", i, d)
					}
				}
				clk.Set(now + 40*time.Minute)
				clk.Set(now)
				if !a[which].Refund() {
					t.Fatal("Refund spent nothing")
				}
				if n := l.Len(); n != 1 {
					t.Errorf("Len %d after the Refund of admission %d, want 1", n, which)
				}
				agrees(t, l, "k", 3)
			})
		}
	}
}

// TestSetBackSweepChangesNothing: a Sweep at a later reading, the clock
// then set back, changes no decision of a key it removed: "x", removed as
// fresh at 1h1m, still owes 2 s at 1h and admits exactly the 3 it would
// have without the Sweep. A Sweep that removed nothing leaves a key never
// seen fresh at 1h (Check and Allow agree on 5; it used to decide it at
// the Sweep's reading). A key never seen, after the Sweep removed "x", is
// decided as owing no later than what "x" owed (sweptAt): Check and Allow
// agree, and it admits no more than without the Sweep.
func TestSetBackSweepChangesNothing(t *testing.T) {
	p := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5}
	l, clk := newManual(t, p)
	clk.Set(time.Hour + time.Minute)
	if n := l.Sweep(); n != 0 {
		t.Fatalf("Sweep removed %d, want 0", n)
	}
	clk.Set(time.Hour)
	agrees(t, l, "z", 5)
	for _, sweep := range []bool{false, true} {
		l, clk := newManual(t, p)
		clk.Set(time.Hour)
		for range 2 {
			l.Allow("x")
		}
		clk.Set(time.Hour + time.Minute)
		if sweep {
			if n := l.Sweep(); n != 1 {
				t.Fatalf("Sweep removed %d, want 1 (x, fresh at 1h1m)", n)
			}
		}
		clk.Set(time.Hour)
		agrees(t, l, "x", 3)
		if r := l.Check("y", 0).Remaining; r > 5 || !sweep && r != 5 {
			t.Errorf("sweep %v: a key never seen has Remaining %d", sweep, r)
		} else {
			agrees(t, l, "y", r)
		}
	}
}

// TestSetBackResetChangesOnlyItsKey: a Reset at a later reading, the clock
// then set back, leaves the key fresh there and no other key changed.
func TestSetBackResetChangesOnlyItsKey(t *testing.T) {
	for name, p := range map[string]hotlimit.Policy{
		"TokenBucket":   hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5},
		"FixedWindow":   hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
		"SlidingWindow": hotlimit.SlidingWindow{Limit: 5, Window: time.Minute},
		"SlidingLog":    hotlimit.SlidingLog{Limit: 5, Window: time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			l, clk := newManual(t, p)
			clk.Set(time.Hour)
			for range 2 {
				l.Allow("x")
			}
			clk.Set(time.Hour + 10*time.Minute)
			l.Reset("x")
			clk.Set(time.Hour)
			agrees(t, l, "x", 5)
			agrees(t, l, "z", 5)
		})
	}
}

// TestSetBackEviction: an eviction under WithMaxKeys between an admission
// and its Refund, with the clock set forward for the eviction and back for
// the Refund. "k" (2 of 5 units taken at 1h) is fresh at 1h1m and is
// evicted there for "x"; back at 1h its Refund gives nothing (its entry is
// gone), and "k" is decided as what it owed there, 2 s: Check and Allow
// agree on 3. A drained key evicted at the reading it was drained at is
// forgotten as it stands: fresh again, 5.
func TestSetBackEviction(t *testing.T) {
	p := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5}
	l, clk := newManual(t, p, hotlimit.WithMaxKeys(1))
	clk.Set(time.Hour)
	var a hotlimit.Admission
	if d := l.AdmitN(&a, "k", 2); !d.Allowed {
		t.Fatalf("AdmitN refused: %+v", d)
	}
	clk.Set(time.Hour + time.Minute)
	if d := l.Allow("x"); !d.Allowed {
		t.Fatalf("x refused: %+v", d)
	}
	if s := l.Stats(); s.Swept != 1 {
		t.Fatalf("Stats %+v: want k removed as fresh", s)
	}
	clk.Set(time.Hour)
	if a.Refund(); l.Stats().Refunded != 0 {
		t.Errorf("the Refund found k's entry after its eviction")
	}
	agrees(t, l, "k", 3)

	l, clk = newManual(t, p, hotlimit.WithMaxKeys(1))
	clk.Set(time.Hour)
	if d := l.AdmitN(&a, "k", 5); !d.Allowed {
		t.Fatalf("AdmitN refused: %+v", d)
	}
	l.Allow("x") // evicts the drained k: forgotten, not swept
	clk.Set(time.Hour - time.Minute)
	a.Refund()
	clk.Set(time.Hour)
	agrees(t, l, "k", 5)
}
