package hotlimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestSlidingGiveBackTwoWindowsLater: an admission given back two windows
// after its own gives nothing back. SlidingWindow{4, 1 s}: 1 unit at
// 0.5 s (window 0), 3 at 1.5 s (window 1), 1 at 2.0 s (window 2, where
// the previous window's 3 weigh in full). Giving the first back then must
// leave the estimate at 3·(W−0)/W + 1 = 4, so one more unit at 2.0 s is
// refused. A give-back that took the unit off the previous window's count
// instead (window.go's refund accepting d ≤ 2 windows for the sliding
// window) let a 5th unit in within one second, [1.0 s, 2.0 s].
func TestSlidingGiveBackTwoWindowsLater(t *testing.T) {
	l, clk := newManual(t, hotlimit.SlidingWindow{Limit: 4, Window: time.Second})
	clk.Set(500 * time.Millisecond)
	var a hotlimit.Admission
	if d := l.AdmitN(&a, "k", 1); !d.Allowed {
		t.Fatalf("AdmitN at 0.5 s refused: %+v", d)
	}
	clk.Set(1500 * time.Millisecond)
	if d := l.AllowN("k", 3); !d.Allowed {
		t.Fatalf("AllowN 3 at 1.5 s refused: %+v", d)
	}
	clk.Set(2 * time.Second)
	if d := l.AllowN("k", 1); !d.Allowed {
		t.Fatalf("AllowN 1 at 2.0 s refused: %+v", d)
	}
	if !a.Refund() {
		t.Fatal("Refund spent nothing")
	}
	if d := l.Check("k", 0); d.Remaining != 0 {
		t.Errorf("Check after the give-back: Remaining %d, want 0 (3 and 1 stand in [1.0 s, 2.0 s])", d.Remaining)
	}
	if d := l.AllowN("k", 1); d.Allowed {
		t.Errorf("a 5th unit was admitted in [1.0 s, 2.0 s] with a limit of 4: %+v", d)
	}
}

// TestSlidingGiveBackOracle checks the sliding-window estimate itself
// against the admissions that stand (not given back), knowing nothing of
// how the limiter keeps its counts: random AdmitN, AllowN, Refunds of any
// held Admission (of this window, the one before, or older), layered
// requests a drained gate refuses (their first layer given back), Sweep
// and Reset, on a clock that moves forward by a tenth of a window up to
// more than one. After every call, with t = k·W + e the clock's reading,
// P the standing cost of window k−1 and Q that of window k, the key must
// report exactly Remaining = ⌊(Limit·W − P·(W−e) − Q·W)/W⌋ (0 if below),
// and every standing admission must have fitted the estimate of the
// admissions standing at its instant (slidingCheck). A give-back that
// lowers a count its admission is not in (the previous window's, for an
// admission two windows back) leaves Remaining above the standing
// estimate at once.
func TestSlidingGiveBackOracle(t *testing.T) {
	seeds := 200
	if testing.Short() || raceEnabled {
		seeds = 50
	}
	for _, p := range []hotlimit.SlidingWindow{{Limit: 4, Window: time.Second}, {Limit: 3, Window: 700 * time.Millisecond}, {Limit: 7, Window: time.Second}} {
		for seed := range seeds {
			runSlidingOracle(t, p, uint64(seed))
		}
	}
}

func runSlidingOracle(t *testing.T, p hotlimit.SlidingWindow, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 6))
	l, clk := newManual(t, p)
	gate := newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, hotlimit.WithClock(clk))
	W := int64(p.Window)
	clk.Set(time.Hour)
	gate.Allow("g") // drained for the hour the run lasts
	type held struct {
		a hotlimit.Admission
		s *standing
	}
	var stand []*standing
	var hs []*held
	var log []string
	for step := range 300 {
		now := int64(clk.Now())
		cost := 1 + r.Int64N(3)
		note := ""
		switch r.IntN(9) {
		case 0, 1:
			h := &held{}
			if d := l.AdmitN(&h.a, "k", cost); d.Allowed {
				h.s = &standing{at: now, cost: cost}
				stand = append(stand, h.s)
				hs = append(hs, h)
			}
			note = fmt.Sprintf("AdmitN %d", cost)
		case 2:
			if l.AllowN("k", cost).Allowed {
				stand = append(stand, &standing{at: now, cost: cost})
			}
			note = fmt.Sprintf("AllowN %d", cost)
		case 3, 4:
			if len(hs) == 0 {
				continue
			}
			i := r.IntN(len(hs))
			h := hs[i]
			hs = slices.Delete(hs, i, i+1)
			h.a.Refund()
			h.s.back = true
			note = fmt.Sprintf("Refund %d of %v", h.s.cost, time.Duration(h.s.at))
		case 5:
			if hotlimit.AllowLayers(hotlimit.Layer{Limiter: l, Key: "k", Cost: cost}, hotlimit.Layer{Limiter: gate, Key: "g", Cost: 1}).Allowed {
				t.Fatal("the drained gate admitted")
			}
			note = fmt.Sprintf("AllowLayers %d, refused by the gate", cost)
		case 6:
			if r.IntN(8) == 0 {
				l.Reset("k")
				stand, hs = nil, nil
				note = "Reset"
			} else {
				note = fmt.Sprintf("Sweep: %d", l.Sweep())
			}
		default:
			d := W/10 + r.Int64N(W+W/5)
			clk.Advance(time.Duration(d))
			note = fmt.Sprintf("clock +%v", time.Duration(d))
		}
		log = append(log, fmt.Sprintf("%3d %v %s", step, clk.Now(), note))
		var live []*standing
		for _, s := range stand {
			if !s.back {
				live = append(live, s)
			}
		}
		now = int64(clk.Now())
		k, e := now/W, now%W
		var prev, cur int64
		for _, s := range live {
			switch s.at / W {
			case k - 1:
				prev += s.cost
			case k:
				cur += s.cost
			}
		}
		want := max(0, p.Limit*W-prev*(W-e)-cur*W) / W
		msg := slidingCheck(live, p.Limit, W)
		if got := l.Check("k", 0).Remaining; got != want && msg == "" {
			msg = fmt.Sprintf("Remaining %d, but %d stand in the window before and %d in this one at elapsed %v: want %d", got, prev, cur, time.Duration(e), want)
		}
		if msg != "" {
			t.Fatalf("%+v seed %d: %s\n%s", p, seed, msg, strings.Join(log[max(0, len(log)-30):], "\n"))
		}
	}
}
