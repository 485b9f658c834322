package hotlimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// setClock is a Clock of the test's own that it sets both ways: not a
// ManualClock, so the limiter takes its readings as a clock that never
// goes back (a reading older than a Reset was taken before it; a bucket
// give-back reads it as it is).
type setClock struct{ now atomic.Int64 }

func (c *setClock) Now() time.Duration  { return time.Duration(c.now.Load()) }
func (c *setClock) Set(t time.Duration) { c.now.Store(int64(t)) }

// settable is the clock a two-way run drives: a ManualClock or a setClock.
type settable interface {
	hotlimit.Clock
	Set(time.Duration)
}

// endsWhileWaiting is a context that ends right after Wait's first check:
// Err reports nothing the first time and Canceled after, and Done is
// closed, so a Wait that has to sleep gives its reservation back at once.
type endsWhileWaiting struct {
	context.Context
	checked atomic.Bool
}

var doneChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *endsWhileWaiting) Done() <-chan struct{} { return doneChan }
func (c *endsWhileWaiting) Err() error {
	if c.checked.Swap(true) {
		return context.Canceled
	}
	return nil
}

// twoWayPolicies are, per algorithm, the policies a run moves between
// with SetPolicy.
var twoWayPolicies = [][]hotlimit.Policy{
	{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 4}, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(4), Burst: 6}},
	{hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3}, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(25), Capacity: 1}},
	{hotlimit.FixedWindow{Limit: 4, Window: time.Second}, hotlimit.FixedWindow{Limit: 6, Window: 300 * time.Millisecond}},
	{hotlimit.SlidingWindow{Limit: 4, Window: time.Second}, hotlimit.SlidingWindow{Limit: 3, Window: 700 * time.Millisecond}},
	{hotlimit.SlidingLog{Limit: 4, Window: time.Second}, hotlimit.SlidingLog{Limit: 5, Window: 800 * time.Millisecond}},
}

type twoWayHeld struct {
	a hotlimit.Admission
	m refmodel.Admission
}

// TestGiveBacksOnAClockBothWays drives a limiter and the reference model
// (internal/refmodel) through the same random calls on a clock set
// forward and back around every give-back path: Admission.Refund,
// AllowLayers refused by a later layer, a Wait whose context ends while
// it sleeps (buckets), with Reset, Sweep and SetPolicy in between, on a
// ManualClock and on a Clock of the test's own. After every call the two
// must agree on the call's Decision, on every key's Check (Remaining,
// ResetAfter: what the key then admits) and on which keys are held. A
// give-back that judged its key at another reading than the model (the
// clock's latest one, as defect 1 did) removes a key the model holds, or
// leaves it where the model does not. Each run is in a synctest bubble, so
// that the Wait's sleep, in real time, is the bubble's.
func TestGiveBacksOnAClockBothWays(t *testing.T) {
	seeds := 150
	if testing.Short() || raceEnabled {
		seeds = 40
	}
	for _, ps := range twoWayPolicies {
		for _, manual := range []bool{true, false} {
			for seed := range seeds {
				name := fmt.Sprintf("%T/manual=%v/seed=%d", ps[0], manual, seed)
				// In a synctest bubble, a Wait's timer cannot fire
				// before its select finds the ended context.
				synctest.Test(t, func(t *testing.T) { runTwoWay(t, name, ps, manual, uint64(seed)) })
			}
		}
	}
}

func runTwoWay(t *testing.T, name string, ps []hotlimit.Policy, manual bool, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 33))
	var clk settable = &setClock{}
	if manual {
		clk = hotlimit.NewManualClock()
	}
	base := time.Hour
	clk.Set(base)
	l := newLimiter(t, ps[0], hotlimit.WithClock(clk), hotlimit.WithShards(1))
	gate := newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, hotlimit.WithClock(clk))
	gate.Allow("g") // drained: refuses every layered request
	m := refmodel.New(ps[0], clk)
	if manual {
		m.OnManualClock()
	}
	bucket := isBucket(ps[0])
	keys := []string{"a", "b", "c"}
	var held []*twoWayHeld
	var log []string
	fail := func(format string, args ...any) {
		t.Helper()
		tail := log[max(0, len(log)-40):]
		t.Fatalf("%s: %s\n%s", name, fmt.Sprintf(format, args...), strings.Join(tail, "\n"))
	}
	same := func(what string, got, want hotlimit.Decision) {
		t.Helper()
		if got != want {
			fail("%s: limiter %+v, model %+v", what, got, want)
		}
	}
	at := base
	for step := range 300 {
		key := keys[r.IntN(len(keys))]
		cost := 1 + r.Int64N(3)
		note := ""
		switch op := r.IntN(13); op {
		case 0, 1:
			note = fmt.Sprintf("AllowN %s %d", key, cost)
			same(note, l.AllowN(key, cost), m.AllowN(key, cost))
		case 2, 3:
			h := &twoWayHeld{}
			d := l.AdmitN(&h.a, key, cost)
			md, ma := m.AdmitN(key, cost)
			note = fmt.Sprintf("AdmitN %s %d: %v", key, cost, d.Allowed)
			same(note, d, md)
			if d.Allowed {
				h.m = ma
				held = append(held, h)
			}
		case 4, 5:
			if len(held) == 0 {
				continue
			}
			i := r.IntN(len(held))
			h := held[i]
			held = slices.Delete(held, i, i+1)
			note = fmt.Sprintf("Refund %s %d (at %v)", h.m.Key, h.m.Cost, time.Duration(h.m.At))
			h.a.Refund()
			m.GiveBack(h.m)
		case 6:
			note = fmt.Sprintf("AllowLayers %s %d, refused by the gate", key, cost)
			if hotlimit.AllowLayers(hotlimit.Layer{Limiter: l, Key: key, Cost: cost}, hotlimit.Layer{Limiter: gate, Key: "g", Cost: 1}).Allowed {
				fail("the drained gate admitted")
			}
			if d, a := m.AdmitN(key, cost); d.Allowed {
				m.GiveBackAt(a)
			}
		case 7:
			if !bucket || cost > m.Limit() {
				continue
			}
			c := l.Check(key, cost)
			sleeps := !c.Allowed || c.Delay > 0
			err := l.Wait(&endsWhileWaiting{Context: context.Background()}, key, cost)
			note = fmt.Sprintf("Wait %s %d, its context ending while it sleeps: %v", key, cost, err)
			if (err == nil) == sleeps {
				fail("%s: slept %v", note, sleeps)
			}
			if ok, a := m.ReserveWithin(key, cost, 1<<62); ok && sleeps {
				m.GiveBackAt(a)
			} else if !ok {
				fail("%s: the model refused the reservation", note)
			}
		case 8:
			note = "Reset " + key
			l.Reset(key)
			m.Reset(key)
		case 9:
			n, mn := l.Sweep(), m.Sweep()
			note = fmt.Sprintf("Sweep: %d", n)
			if n != mn {
				fail("Sweep removed %d, the model %d", n, mn)
			}
		case 10:
			if r.IntN(3) != 0 {
				continue
			}
			p := ps[r.IntN(len(ps))]
			note = fmt.Sprintf("SetPolicy %+v", p)
			if err := l.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
			m.SetPolicy(p)
		default:
			// The clock: forward, back (below decisions already made), or
			// a look-ahead (forward and back again), read by both or by
			// neither.
			d := []time.Duration{time.Millisecond, 37 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond, 1300 * time.Millisecond}[r.IntN(5)]
			switch r.IntN(3) {
			case 0:
				at += d
			case 1:
				at = max(base, at-d)
			case 2:
				clk.Set(at + d)
				if r.IntN(2) == 0 {
					same("a look-ahead's Check", l.Check(key, 0), m.Peek(key))
				}
			}
			clk.Set(at)
			note = fmt.Sprintf("clock at %v", at-base)
		}
		log = append(log, fmt.Sprintf("%3d %v %s", step, clk.Now()-base, note))
		for _, k := range keys {
			same("Check "+k+" after "+note, l.Check(k, 0), m.Peek(k))
		}
		if n := len(m.Held()); l.Len() != n {
			fail("after %s: the limiter holds %d keys, the model %d (%v)", note, l.Len(), n, m.Held())
		}
	}
}
