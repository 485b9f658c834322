package hotlimit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
)

// bucketBound is an oracle for a bucket's promise that knows nothing of
// how the limiter keeps its state. Take the admissions of a key that
// stand (not given back) in the order they were decided, each with the
// clock reading r it was decided at and the latest reading m the clock
// had shown by then (a ManualClock may be set back; a limiter decides at
// most as late as m). For any run of them, the first at r1 and the last at
// m2, they cost at most Limit + (m2 − r1)/T units. Without give-backs this
// is GCRA's own bound: the TAT never goes down, each admission in the run
// moves it up by cost·T from no earlier than r1, and the last leaves it no
// more than Limit·T after m2. A give-back only takes an admission out of
// the set, and must not give back anything that lets the rest break the
// bound. With a clock that never goes back, m = r and this is the bound
// over every interval of time.
//
// For the windows the oracle takes a clock that never goes back, and checks
// that the standing admissions of one window [k·Window, (k+1)·Window) cost
// at most Limit (FixedWindow; SlidingWindow, whose estimate counts the
// current window in full, never admits more either), and for SlidingLog
// those of every trailing window (t − Window, t]. For SlidingWindow it
// also checks the estimate itself (slidingCheck): at the instant t of
// each standing admission, the standing admissions of the window before
// t's, weighted by the part of it the sliding window [t − W, t) still
// covers, and those of t's window decided up to it, fit in Limit.
type bucketBound struct {
	p      hotlimit.Policy
	t, tau int64 // a bucket's interval and length, in ns
	seg    []*standing
	gen    int // segments started
}

// standing is one admission the oracle tracks.
type standing struct {
	at, latest, cost int64
	back             bool // given back
}

func (o *bucketBound) admit(at, latest, cost int64) *standing {
	s := &standing{at: at, latest: latest, cost: cost}
	o.seg = append(o.seg, s)
	return s
}

// restart starts a new segment under a bucket of interval t and length
// tau: after a Reset or an eviction the key starts afresh, and after
// SetPolicy the bound is the new policy's.
func (o *bucketBound) restart(p hotlimit.Policy) {
	o.p, o.seg = p, nil
	o.gen++
	if isBucket(p) {
		o.t, o.tau = boundOf(p)
	}
}

func isBucket(p hotlimit.Policy) bool {
	switch p.(type) {
	case hotlimit.TokenBucket, hotlimit.LeakyBucket:
		return true
	}
	return false
}

// check returns a description of a run of standing admissions that costs
// more than the bound, or "".
func (o *bucketBound) check() string {
	var s []*standing
	for _, a := range o.seg {
		if !a.back {
			s = append(s, a)
		}
	}
	switch p := o.p.(type) {
	case hotlimit.FixedWindow:
		return windowCheck(s, p.Limit, int64(p.Window), false)
	case hotlimit.SlidingWindow:
		if msg := windowCheck(s, p.Limit, int64(p.Window), false); msg != "" {
			return msg
		}
		return slidingCheck(s, p.Limit, int64(p.Window))
	case hotlimit.SlidingLog:
		return windowCheck(s, p.Limit, int64(p.Window), true)
	}
	for i := range s {
		var sum int64
		for j := i; j < len(s); j++ {
			sum += s[j].cost
			if sum*o.t > o.tau+(s[j].latest-s[i].at) {
				return fmt.Sprintf("%d units stand from %v to %v; the bound is %d + %v/T",
					sum, time.Duration(s[i].at), time.Duration(s[j].latest), o.tau/o.t, time.Duration(s[j].latest-s[i].at))
			}
		}
	}
	return ""
}

// windowCheck checks standing admissions s against limit per window of w:
// the fixed windows, or every trailing one.
func windowCheck(s []*standing, limit, w int64, trailing bool) string {
	for _, a := range s {
		var sum int64
		for _, b := range s {
			if trailing && b.at <= a.at && b.at > a.at-w || !trailing && b.at/w == a.at/w {
				sum += b.cost
			}
		}
		if sum > limit {
			return fmt.Sprintf("%d units stand in the window of %v; the limit is %d", sum, time.Duration(a.at), limit)
		}
	}
	return ""
}

// slidingCheck checks standing admissions s, in decision order, against
// the sliding-window estimate at each one's instant t = k·w + e: with P
// the standing cost of window k−1 and Q that of window k up to and
// including it, P·(w − e) + Q·w ≤ limit·w. An admission decided on that
// estimate passes; a give-back only takes admissions out, which lowers P
// and Q. A give-back that lowers a count the standing admissions still
// fill (the count of a window its admission is not in) lets a later one
// in that the standing admissions' estimate refuses.
func slidingCheck(s []*standing, limit, w int64) string {
	for i, a := range s {
		k, e := a.at/w, a.at%w
		var prev, cur int64
		for j, b := range s {
			switch {
			case b.at/w == k-1:
				prev += b.cost
			case b.at/w == k && j <= i:
				cur += b.cost
			}
		}
		if prev*(w-e)+cur*w > limit*w {
			return fmt.Sprintf("at %v, %d units stand in the window before and %d in its own up to it: the sliding estimate %d·(W−%v)/W + %d is above the limit %d",
				time.Duration(a.at), prev, cur, prev, time.Duration(e), cur, limit)
		}
	}
	return ""
}

// oracleRun drives one limiter at random against bucketBound.
type oracleRun struct {
	t      *testing.T
	r      *rand.Rand
	c      *hotlimit.ManualClock
	l      *hotlimit.Limiter
	gate   *hotlimit.Limiter // drained: refuses every layered request
	pass   *hotlimit.Limiter // admits every layered request
	o      bucketBound
	held   []*heldAdmission
	spent  []*heldAdmission
	log    []string
	evicts uint64
	depth  int
	latest int64          // the latest reading the clock has shown
	waits  []*pendingWait // in a synctest bubble: Waits not yet seen to return
	bubble bool
}

// pendingWait is a Wait running in its own goroutine of the test's
// synctest bubble.
type pendingWait struct {
	at, deadline, cost int64     // the reading it started at; its deadline, in the bubble's time
	gen                int       // the oracle's segment it started in
	s                  *standing // a bucket's reservation, in decision order: standing once it returns nil
	cancel             func()
	err                chan error
}

type heldAdmission struct {
	a hotlimit.Admission
	s *standing
}

var oraclePolicies = []hotlimit.Policy{
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 4},
	hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3},
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(4), Burst: 6},
	hotlimit.TokenBucket{Rate: hotlimit.PerSecond(25), Burst: 2},
	hotlimit.FixedWindow{Limit: 4, Window: time.Second},
	hotlimit.SlidingWindow{Limit: 4, Window: time.Second},
	hotlimit.SlidingLog{Limit: 4, Window: time.Second},
	hotlimit.FixedWindow{Limit: 6, Window: 300 * time.Millisecond},
	hotlimit.SlidingWindow{Limit: 3, Window: 700 * time.Millisecond},
	hotlimit.SlidingLog{Limit: 5, Window: 800 * time.Millisecond},
}

func boundOf(p hotlimit.Policy) (t, tau int64) {
	switch p := p.(type) {
	case hotlimit.TokenBucket:
		t = int64(p.Rate.Interval())
		return t, p.Burst * t
	case hotlimit.LeakyBucket:
		t = int64(p.Rate.Interval())
		return t, (p.Capacity + 1) * t
	}
	panic("not a bucket")
}

func (r *oracleRun) now() int64 {
	now := max(0, int64(r.c.Now()))
	r.latest = max(r.latest, now)
	return now
}

func (r *oracleRun) note(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf("%*s%v ", 2*r.depth, "", time.Duration(r.now()))+fmt.Sprintf(format, args...))
}

// boundary restarts the oracle's segment if an eviction happened (the
// victim may have been "k").
func (r *oracleRun) evictions() {
	if e := r.l.Stats().Evicted; e != r.evicts {
		r.evicts = e
		r.note("eviction: new segment")
		r.o.restart(r.o.p)
	}
}

func (r *oracleRun) step() {
	cost := 1 + r.r.Int64N(3)
	switch op := r.r.IntN(14); op {
	case 0, 1, 2:
		h := &heldAdmission{}
		at := r.now()
		if r.l.AdmitN(&h.a, "k", cost).Allowed {
			h.s = r.o.admit(at, r.latest, cost)
			r.held = append(r.held, h)
			r.note("AdmitN %d: admitted (held %d)", cost, len(r.held)-1)
		}
	case 3:
		at := r.now()
		if r.l.AllowN("k", cost).Allowed {
			r.o.admit(at, r.latest, cost)
			r.note("AllowN %d: admitted", cost)
		}
	case 4, 5:
		if len(r.held) == 0 {
			return
		}
		i := r.r.IntN(len(r.held))
		h := r.held[i]
		r.held = slices.Delete(r.held, i, i+1)
		if !h.a.Refund() {
			r.t.Fatalf("the first Refund of a held Admission did not spend it\n%v", r.trace())
		}
		h.s.back = true
		r.spent = append(r.spent, h)
		r.note("Refund of a %d", h.s.cost)
	case 6:
		if len(r.spent) > 0 && r.spent[r.r.IntN(len(r.spent))].a.Refund() {
			r.t.Fatalf("a second Refund spent an Admission again\n%v", r.trace())
		}
	case 7:
		if r.depth > 0 {
			return
		}
		at := r.now()
		// "k" (twice, one limit for the sum, half the time), and a decoy
		// of the same limiter (whose insertion may evict "k") a third.
		layers := []hotlimit.Layer{{Limiter: r.l, Key: "k", Cost: cost}}
		total := cost
		if r.r.IntN(2) == 0 {
			layers = append(layers, hotlimit.Layer{Limiter: r.l, Key: "k", Cost: 1})
			total++
		}
		if r.r.IntN(3) == 0 {
			layers = append(layers, hotlimit.Layer{Limiter: r.l, Key: fmt.Sprint("d", r.r.IntN(5)), Cost: 1})
		}
		evicted := r.evicts
		if r.r.IntN(3) == 0 {
			ok := hotlimit.AllowLayers(append(layers, hotlimit.Layer{Limiter: r.pass, Key: "p", Cost: 1})...).Allowed
			r.note("AllowLayers %d of %d layers: %v", total, len(layers)+1, ok)
			if r.evictions(); ok && r.evicts == evicted {
				r.o.admit(at, r.latest, total)
			}
			r.pass.Reset("p")
			return
		}
		r.note("AllowLayers %d of %d layers, refused by the gate: {", total, len(layers)+1)
		r.depth++
		if hotlimit.AllowLayers(append(layers, hotlimit.Layer{Limiter: r.gate, Key: "g", Cost: 1})...).Allowed {
			r.t.Fatal("the drained gate admitted")
		}
		r.depth--
		r.note("}")
		r.evictions()
	case 8:
		d := []time.Duration{time.Millisecond, 13 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 170 * time.Millisecond, 400 * time.Millisecond}[r.r.IntN(6)]
		if r.r.IntN(4) == 0 && isBucket(r.o.p) {
			d = -d // the windows' oracle takes a clock that never goes back
		}
		r.c.Advance(d)
		r.note("clock %+v", d)
	case 9:
		if r.r.IntN(3) == 0 {
			r.l.Reset("k")
			r.note("Reset: new segment")
			r.o.restart(r.o.p)
		} else {
			r.note("Sweep: %d", r.l.Sweep())
		}
	case 10, 11:
		key := fmt.Sprint("d", r.r.IntN(5))
		n := r.l.AllowN(key, cost).Allowed
		r.note("AllowN %s %d: %v", key, cost, n)
		r.evictions()
	case 12:
		if r.r.IntN(4) != 0 {
			return
		}
		p := oraclePolicies[r.r.IntN(len(oraclePolicies))]
		if fmt.Sprintf("%T", p) != fmt.Sprintf("%T", r.l.Policy()) {
			return
		}
		if err := r.l.SetPolicy(p); err != nil {
			r.t.Fatal(err)
		}
		r.note("SetPolicy %+v: new segment", p)
		r.o.restart(p)
	case 13:
		if !r.bubble {
			return // nothing: the hook's sequences end more often
		}
		switch r.r.IntN(3) {
		case 0:
			d := []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second}[r.r.IntN(3)]
			ctx, cancel := context.WithTimeout(context.Background(), d)
			w := &pendingWait{at: r.now(), deadline: int64(d), cost: cost, gen: r.o.gen, cancel: cancel, err: make(chan error, 1)}
			if isBucket(r.o.p) {
				w.s = r.o.admit(w.at, max(r.latest, w.at+w.deadline), cost)
				w.s.back = true
			}
			go func() { w.err <- r.l.Wait(ctx, "k", cost) }()
			r.waits = append(r.waits, w)
			r.note("Wait %d, deadline %v", cost, d)
		case 1:
			if len(r.waits) > 0 {
				r.waits[r.r.IntN(len(r.waits))].cancel()
				r.note("a Wait cancelled")
			}
		case 2:
			d := []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond}[r.r.IntN(3)]
			time.Sleep(d) // the bubble's time: pending Waits wake or pass their deadlines
			r.note("the bubble's time +%v", d)
		}
		r.settle()
	}
}

// settle waits until every pending Wait has returned or blocks, and books
// those that admitted: a bucket's reservation where it was decided, when
// the Wait started, at the reading it started at, its slot no later than
// its deadline after it (the bound then allows for the slot); a window's
// at the reading now, when its retry admitted.
func (r *oracleRun) settle() {
	synctest.Wait()
	for i := 0; i < len(r.waits); {
		w := r.waits[i]
		select {
		case err := <-w.err:
			w.cancel()
			switch {
			case err != nil:
			case w.gen != r.o.gen:
				// Reserved before a Reset, an eviction or SetPolicy:
				// forgotten with that state, or judged under another policy.
			case isBucket(r.o.p):
				w.s.back = false
			default:
				r.o.admit(r.now(), r.latest, w.cost)
			}
			r.note("a Wait %d returned %v", w.cost, err)
			r.waits = slices.Delete(r.waits, i, i+1)
			r.evictions()
		default:
			i++
		}
	}
}

func (r *oracleRun) trace() string {
	const last = 60
	lines := r.log
	if len(lines) > last {
		lines = lines[len(lines)-last:]
	}
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}

// TestGiveBackOracle: random sequences of AdmitN, AllowN, Refunds in any
// order (and spent again), AllowLayers refused by a gate whose deny hook
// runs more of them between the layer's admission and its give-back,
// clock moves (back too, for the buckets), Sweep, Reset, evictions under
// WithMaxKeys and SetPolicy never leave a key's standing admissions above
// its policy's bound (bucketBound), checked after every call, for the
// buckets, the windows and the sliding log.
func TestGiveBackOracle(t *testing.T) {
	seeds := 300
	if testing.Short() || raceEnabled {
		seeds = 60
	}
	for _, p := range []hotlimit.Policy{oraclePolicies[0], oraclePolicies[1], oraclePolicies[4], oraclePolicies[5], oraclePolicies[6]} {
		for seed := range seeds {
			runOracle(t, p, seed, false)
		}
	}
}

// TestGiveBackOracleWait is TestGiveBackOracle with Waits too, each in its
// own goroutine of a synctest bubble, with a deadline in the bubble's
// time: a step starts one, cancels one, or lets the bubble's time pass
// (pending Waits then wake, or pass their deadlines and give their slots
// back), and then waits until every Wait has returned or blocks.
func TestGiveBackOracleWait(t *testing.T) {
	seeds := 100
	if testing.Short() || raceEnabled {
		seeds = 20
	}
	for _, p := range []hotlimit.Policy{oraclePolicies[0], oraclePolicies[1], oraclePolicies[4], oraclePolicies[6]} {
		for seed := range seeds {
			synctest.Test(t, func(t *testing.T) { runOracle(t, p, seed, true) })
		}
	}
}

func runOracle(t *testing.T, p hotlimit.Policy, seed int, bubble bool) {
	r := &oracleRun{t: t, r: rand.New(rand.NewPCG(uint64(seed), 22)), bubble: bubble}
	defer func() {
		for _, w := range r.waits {
			w.cancel()
			<-w.err
		}
	}()
	r.c = hotlimit.NewManualClock()
	r.c.Set(time.Hour)
	r.latest = int64(time.Hour)
	r.l = newLimiter(t, p, hotlimit.WithClock(r.c), hotlimit.WithShards(1), hotlimit.WithMaxKeys(4))
	r.pass = newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, hotlimit.WithClock(r.c))
	r.gate = newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, hotlimit.WithClock(r.c),
		hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) {
			r.evictions() // a decoy layer's insertion may have evicted "k"
			for range r.r.IntN(6) {
				r.step()
				if msg := r.o.check(); msg != "" {
					t.Fatalf("%T seed %d: %s\n%v", p, seed, msg, r.trace())
				}
			}
		}))
	r.gate.Allow("g")
	r.o.restart(p)
	for range 400 {
		r.step()
		if msg := r.o.check(); msg != "" {
			t.Fatalf("%T seed %d: %s\n%v", p, seed, msg, r.trace())
		}
	}
}
