package fuzz

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// The harness drives one policy through a sequence of operations on three
// subjects that share one ManualClock:
//
//   - lim, the limiter under test, swept only when an operation says so;
//   - twin, a second limiter with the same policy that is swept before every
//     operation (the sweeper must be invisible: it must decide exactly as lim);
//   - model, refmodel's reference implementation.
//
// Every operation is checked against the oracles listed on FuzzDecisions.

const (
	year    = 365 * 24 * time.Hour
	century = 100 * year
)

// maxTime is where the limiter's (and the model's) clock saturates, about
// 2^62 ns. It is measured rather than copied from policy.go: a token bucket
// with T = 1ns admits one request with the clock at MaxInt64, which puts
// its TAT at maxTime+1, and a peek at reading 0 reports that TAT as
// ResetAfter.
var maxTime = func() int64 {
	c := hotlimit.NewManualClock()
	c.Set(math.MaxInt64)
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 1}, Burst: 1},
		hotlimit.WithClock(c), hotlimit.WithSweepInterval(0))
	if err != nil {
		panic(err)
	}
	defer l.Close()
	l.Allow("k")
	c.Set(0)
	return int64(l.AllowN("k", 0).ResetAfter) - 1
}()

// keys are the keys the harness uses: a short inline key, one of exactly
// the inline limit (15 bytes), and one stored out of line.
var keys = [3]string{"a", "fifteen-bytes!!", "a-key-that-is-much-longer-than-fifteen-bytes"}

type algo int

const (
	tokenBucket algo = iota
	leakyBucket
	fixedWindow
	slidingWindow
)

func (a algo) String() string {
	return [...]string{"TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow"}[a]
}

// params are the numbers of a policy that the oracles need.
type params struct {
	algo  algo
	limit int64 // Decision.Limit: Burst, Capacity+1 or Limit
	t     int64 // emission interval T = ⌈Per/N⌉ (buckets)
	w     int64 // window length W (windows)
	// horizon (windows only): how many windows a window state can be
	// away from a reading and still be read right; 0 when unbounded.
	horizon int64
}

// windowHorizon returns a safe horizon for a window policy, in windows,
// or 0 if it has none. window.go packs the window index into
// eb = 63−cb bits (fixed) or 63−2cb bits (sliding), cb the bit length of
// Limit. When ⌊maxTime/W⌋ fits in eb bits the full index is stored ("exact
// mode") and every reading is read right. Otherwise the index is kept
// modulo 2^eb ("ring mode") and is misread by a reading 2^(eb−1) windows
// or more away from it, in either direction: a key idle that long (the
// semantics accept this because the sweeper removes idle keys first), or a
// reading that stale (window.go: outside the contract). The harness keeps
// to half of that.
func windowHorizon(limit, w int64, sliding bool) int64 {
	if limit <= 0 || w <= 0 {
		return 0 // not a valid policy: New rejects it
	}
	cb := bits.Len64(uint64(limit))
	used := cb
	if sliding {
		used = 2 * cb
	}
	eb := 63 - used
	if eb <= 2 || bits.Len64(uint64(maxTime/w)) <= eb {
		return 0
	}
	return 1 << (eb - 2)
}

// paramsOf returns the params of a policy value (not a pointer).
func paramsOf(p hotlimit.Policy) params {
	switch p := p.(type) {
	case hotlimit.TokenBucket:
		return params{algo: tokenBucket, limit: p.Burst, t: int64(p.Rate.Interval())}
	case hotlimit.LeakyBucket:
		return params{algo: leakyBucket, limit: p.Capacity + 1, t: int64(p.Rate.Interval())}
	case hotlimit.FixedWindow:
		return params{algo: fixedWindow, limit: p.Limit, w: int64(p.Window), horizon: windowHorizon(p.Limit, int64(p.Window), false)}
	case hotlimit.SlidingWindow:
		return params{algo: slidingWindow, limit: p.Limit, w: int64(p.Window), horizon: windowHorizon(p.Limit, int64(p.Window), true)}
	}
	panic(fmt.Sprintf("fuzz: unsupported policy %T", p))
}

func (p params) bucket() bool { return p.algo <= leakyBucket }

// scale is the policy's unit of time: T for the buckets, W for the windows.
func (p params) scale() int64 {
	if p.bucket() {
		return p.t
	}
	return p.w
}

// maxReset is the largest ResetAfter a decision may report: limit·T for the
// buckets (AllowN never lets TAT run further ahead), W for the fixed window,
// 2W for the sliding window (the current count expires at the end of the
// next window).
func (p params) maxReset() int64 {
	switch p.algo {
	case fixedWindow:
		return p.w
	case slidingWindow:
		return satMul(2, p.w)
	}
	return satMul(p.limit, p.t)
}

// satAdd returns a+b for a, b ≥ 0, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// satMul returns a·b for a, b ≥ 0, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(lo)
}

// mulDiv returns ⌊a·b/d⌋ for a, b ≥ 0 and d > 0, saturating at MaxInt64.
func mulDiv(a, b, d int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(min(q, math.MaxInt64))
}

// le128 reports whether a·b ≤ c·d for non-negative operands, exactly.
func le128(a, b, c, d int64) bool {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 < h2 || h1 == h2 && l1 <= l2
}

// opRec is one operation in a harness's trace, printed on failure.
type opRec struct {
	op   string
	key  int
	cost int64
	arg  int64
	at   int64 // effective clock reading when the operation ran
}

type harness struct {
	tb testing.TB
	params
	policy hotlimit.Policy

	clock *hotlimit.ManualClock
	lim   *hotlimit.Limiter
	twin  *hotlimit.Limiter
	model *refmodel.Model
	env   *envelope

	// present: keys the limiter must hold (admitted since they were last
	// removed as fresh). presentTwin likewise for twin.
	present, presentTwin [len(keys)]bool
	// lastAdmit: the latest reading at which each key was admitted (see
	// params.horizon).
	lastAdmit [len(keys)]int64
	// swept, sweptTwin: entries removed by Sweep calls, summed.
	swept, sweptTwin uint64
	// bgSweep: lim runs a background sweeper, so its Len and Stats.Swept
	// can only be bounded.
	bgSweep bool
	// stale: the clock may be set back (FuzzStaleClock). Nothing is swept
	// then: a sweep at S makes a key re-created at an older reading decide
	// at S (gc.go, sweptAt), which the model does not mirror.
	stale bool
	// maxSeen: the latest effective reading so far; a reading below it is
	// stale.
	maxSeen int64
	// Counters the twin's Stats must match: exact admissions, and denials
	// between deniedLo and deniedHi (a Wait whose deadline is about to
	// expire may fail before or after it counts a denial).
	allowed, deniedLo, deniedHi uint64

	trace []opRec
}

// newHarness builds the three subjects for policy (a value or a pointer
// to one; value is the same policy as a value). extra are options for lim
// only. It returns New's error for lim, if any.
func newHarness(t testing.TB, policy, value hotlimit.Policy, bgSweep bool, extra ...hotlimit.Option) (*harness, error) {
	clock := hotlimit.NewManualClock()
	opts := append([]hotlimit.Option{hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0), hotlimit.WithShards(1)}, extra...)
	lim, err := hotlimit.New(policy, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { lim.Close() })
	twin, err := hotlimit.New(value, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0), hotlimit.WithShards(2))
	if err != nil {
		t.Fatalf("New accepted %#v with options but rejects it without: %v", policy, err)
	}
	t.Cleanup(func() { twin.Close() })
	p := paramsOf(value)
	return &harness{
		tb: t, params: p, policy: value, clock: clock, lim: lim, twin: twin,
		model:   refmodel.New(value, clock),
		env:     newEnvelope(p),
		bgSweep: bgSweep,
	}, nil
}

// avoidKnownBugs steers the targets around known bugs (see
// known_bugs_test.go); TestKnownBugs turns it off to reproduce them.
var avoidKnownBugs = true

// now returns the effective time: the clock clamped to [0, maxTime].
func (h *harness) now() int64 { return min(max(int64(h.clock.Now()), 0), maxTime) }

// isStale reports whether the clock reads earlier than it has before.
func (h *harness) isStale() bool { return h.now() < h.maxSeen }

func (h *harness) record(op string, key int, cost, arg int64) {
	h.trace = append(h.trace, opRec{op: op, key: key, cost: cost, arg: arg, at: h.now()})
}

func (h *harness) fail(format string, args ...any) {
	h.tb.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, format, args...)
	fmt.Fprintf(&b, "\npolicy %#v (limit %d, T %d, W %d)\nlast operations, oldest first:", h.policy, h.limit, h.t, h.w)
	for _, o := range h.trace[max(0, len(h.trace)-40):] {
		fmt.Fprintf(&b, "\n  at %d: %s", o.at, o.op)
		switch o.op {
		case "AllowN", "Wait":
			fmt.Fprintf(&b, "(%q, %d)", keys[o.key], o.cost)
			if o.op == "Wait" {
				fmt.Fprintf(&b, " mode %d", o.arg)
			}
		case "Advance", "SetBack":
			fmt.Fprintf(&b, "(%d)", o.arg)
		}
	}
	h.tb.Fatal(b.String())
}

// peek returns key's state as cost 0 sees it, requiring lim, twin and model
// to agree and the decision to be a well-formed peek.
func (h *harness) peek(ki int) hotlimit.Decision {
	h.tb.Helper()
	k := keys[ki]
	a, b, m := h.lim.AllowN(k, 0), h.twin.AllowN(k, 0), h.model.Peek(k)
	h.allowed++ // the twin counts its peek
	if a != m {
		h.fail("peek %q at %d: limiter %+v, model %+v", k, h.now(), a, m)
	}
	if b != a {
		h.fail("peek %q at %d: swept twin %+v, limiter %+v", k, h.now(), b, a)
	}
	h.checkFields(a, 0, a, h.now())
	return a
}

// allow runs AllowN(key, cost) on all three subjects.
func (h *harness) allow(ki int, cost int64) {
	h.tb.Helper()
	k := keys[ki]
	h.record("AllowN", ki, cost, 0)
	now := h.now()
	before := h.peek(ki)
	got := h.lim.AllowN(k, cost)
	twin := h.twin.AllowN(k, cost)
	want := h.model.AllowN(k, cost)
	if got != want {
		h.fail("AllowN(%q, %d) at %d:\n  limiter %+v\n  model   %+v", k, cost, now, got, want)
	}
	if twin != got {
		h.fail("AllowN(%q, %d) at %d: the swept twin decided %+v, the limiter %+v", k, cost, now, twin, got)
	}
	if got.Allowed {
		h.allowed++
	} else {
		h.deniedLo++
		h.deniedHi++
	}
	h.checkFields(got, cost, before, now)
	if !got.Allowed {
		if after := h.peek(ki); after != before {
			h.fail("denied AllowN(%q, %d) at %d changed the state: peek before %+v, after %+v", k, cost, now, before, after)
		}
	} else if cost > 0 {
		h.admitted(ki, cost, got.Delay, now)
	}
	h.checkHonest(ki, cost, got, now)
}

// admitted records an admission for the Len and envelope oracles.
func (h *harness) admitted(ki int, cost int64, delay time.Duration, now int64) {
	h.tb.Helper()
	h.present[ki], h.presentTwin[ki] = true, true
	// A window state's index is that of the latest reading that wrote it.
	h.lastAdmit[ki] = max(h.lastAdmit[ki], now)
	if h.isStale() {
		// Admissions at stale readings are left out of the envelope:
		// they only make later ones harder (see envelope), so the
		// bounds still hold over the rest.
		return
	}
	if msg := h.env.admit(ki, now, cost, int64(delay)); msg != "" {
		h.fail("envelope violated by the admission of AllowN(%q, %d) at %d: %s", keys[ki], cost, now, msg)
	}
}

// checkFields checks d, the decision for cost at now, against what
// docs/semantics.md says of each field, given before, the key's peek just before.
// These checks do not use the model. At a stale reading a window policy
// decides at the start of the state's own window, not at the reading, so
// the checks that measure from the reading are skipped then.
func (h *harness) checkFields(d hotlimit.Decision, cost int64, before hotlimit.Decision, now int64) {
	h.tb.Helper()
	L := h.limit
	bad := func(why string) {
		h.tb.Helper()
		h.fail("cost %d at %d: %s\n  decision %+v\n  peek before %+v", cost, now, why, d, before)
	}
	switch {
	case d.Limit != L:
		bad(fmt.Sprintf("Limit is not %d", L))
	case d.Remaining < 0 || d.Remaining > L:
		bad("Remaining out of [0, Limit]")
	case d.ResetAfter < 0 || int64(d.ResetAfter) > h.maxReset() && !(h.isStale() && h.bucket()):
		// (At a stale reading a bucket's debt is measured from the
		// reading, so it may exceed Limit·T.)
		bad(fmt.Sprintf("ResetAfter out of [0, %d]", h.maxReset()))
	case (d.ResetAfter == 0) != (d.Remaining == L):
		bad("ResetAfter is 0 but Remaining is not Limit, or the reverse (fresh means full)")
	case d.Allowed && d.RetryAfter != 0:
		bad("allowed with RetryAfter ≠ 0")
	case !d.Allowed && d.RetryAfter <= 0:
		bad("denied with RetryAfter ≤ 0")
	case d.Delay != 0 && !(h.algo == leakyBucket && d.Allowed && cost > 0):
		bad("Delay ≠ 0 outside a leaky-bucket admission")
	case d.Delay < 0 || int64(d.Delay) > satMul(L-1, h.t):
		bad("Delay out of [0, Capacity·T]")
	}
	switch {
	case cost < 0 || cost > L:
		if d.Allowed || d.RetryAfter != hotlimit.Never || d.Remaining != before.Remaining || d.ResetAfter != before.ResetAfter {
			bad("cost outside [0, Limit] must be denied with RetryAfter Never and the state's Remaining and ResetAfter")
		}
		return
	case cost == 0:
		if d != before {
			bad("a peek must report the state")
		}
		return
	}
	// 1 ≤ cost ≤ Limit: admitted exactly when it fits in Remaining.
	if d.Allowed != (cost <= before.Remaining) {
		bad("admitted iff cost ≤ Remaining before")
	}
	if !d.Allowed {
		if d.Remaining != before.Remaining || d.ResetAfter != before.ResetAfter {
			bad("a denial must report the unchanged state")
		}
		switch h.algo {
		case tokenBucket, leakyBucket:
			// GCRA: fits once TAT has drained to now + Limit·T − cost·T.
			if want := int64(before.ResetAfter) + cost*h.t - L*h.t; int64(d.RetryAfter) != want {
				bad(fmt.Sprintf("RetryAfter ≠ debt + cost·T − Limit·T = %d", want))
			}
		case fixedWindow:
			if want := h.w - now%h.w; int64(d.RetryAfter) != want && !h.isStale() {
				bad(fmt.Sprintf("RetryAfter ≠ time to the next window = %d", want))
			}
		case slidingWindow:
			if want := 2*h.w - now%h.w; int64(d.RetryAfter) > want && !h.isStale() {
				bad(fmt.Sprintf("RetryAfter > time until both counts expire = %d", want))
			}
		}
		return
	}
	if d.Remaining != before.Remaining-cost {
		bad("an admission must take exactly cost from Remaining")
	}
	switch h.algo {
	case tokenBucket, leakyBucket:
		if want := int64(before.ResetAfter) + cost*h.t; int64(d.ResetAfter) != want {
			bad(fmt.Sprintf("ResetAfter ≠ debt + cost·T = %d", want))
		}
		if h.algo == leakyBucket && d.Delay != before.ResetAfter {
			bad("leaky Delay ≠ the debt before the admission")
		}
	case fixedWindow:
		if want := h.w - now%h.w; int64(d.ResetAfter) != want && !h.isStale() {
			bad(fmt.Sprintf("ResetAfter ≠ time to the end of the window = %d", want))
		}
	case slidingWindow:
		if want := 2*h.w - now%h.w; int64(d.ResetAfter) != want && !h.isStale() {
			bad(fmt.Sprintf("ResetAfter ≠ time to the end of the next window = %d", want))
		}
	}
}

// checkHonest checks, on clones of the model, that RetryAfter is the
// shortest wait, that ResetAfter is exactly when the key is fresh again,
// and that exactly Remaining unit requests pass now.
func (h *harness) checkHonest(ki int, cost int64, d hotlimit.Decision, now int64) {
	h.tb.Helper()
	k := keys[ki]
	at := func(t int64) *refmodel.Model {
		c := hotlimit.NewManualClock()
		c.Set(time.Duration(t))
		return h.model.Clone(c)
	}
	// At a stale reading a window decides at the start of the state's
	// window, and RetryAfter and ResetAfter count from there, not from the
	// reading; the buckets count from the reading.
	timed := h.bucket() || !h.isStale()
	if ra := int64(d.RetryAfter); timed && !d.Allowed && d.RetryAfter != hotlimit.Never && ra <= maxTime-now {
		if got := at(now+ra-1).AllowN(k, cost); got.Allowed {
			h.fail("AllowN(%q, %d) at %d: RetryAfter %d, but admitted 1ns earlier: %+v", k, cost, now, ra, got)
		}
		if got := at(now+ra).AllowN(k, cost); !got.Allowed {
			h.fail("AllowN(%q, %d) at %d: RetryAfter %d, but denied then: %+v", k, cost, now, ra, got)
		}
	}
	if rs := int64(d.ResetAfter); timed && rs > 0 && rs <= maxTime-now {
		if p := at(now + rs - 1).Peek(k); p.ResetAfter != 1 || p.Remaining == h.limit {
			h.fail("%q at %d: ResetAfter %d, but 1ns earlier the peek is %+v", k, now, rs, p)
		}
		if p := at(now + rs).Peek(k); p.ResetAfter != 0 || p.Remaining != h.limit {
			h.fail("%q at %d: ResetAfter %d, but then the peek is %+v", k, now, rs, p)
		}
	}
	if d.Remaining <= 64 {
		m := at(now)
		for i := int64(0); i < d.Remaining; i++ {
			if !m.AllowN(k, 1).Allowed {
				h.fail("%q at %d: Remaining %d, but unit request %d is denied", k, now, d.Remaining, i)
			}
		}
		if got := m.AllowN(k, 1); got.Allowed {
			h.fail("%q at %d: Remaining %d, but one more unit request is admitted", k, now, d.Remaining)
		}
	}
}

// Wait modes. Wait sleeps in real time, so the harness only drives the
// paths that return at once: a context that has already expired, an
// immediate admission, and a deadline before the request's slot.
const (
	waitExpired    = 0 // deadline one second in the past
	waitHalfway    = 1 // immediate: deadline in 1h; else deadline at slot/2
	waitJustBefore = 2 // immediate: no deadline; else deadline at slot−1ns
)

// wait runs Wait(key, cost) on lim and twin and mirrors its effect in the
// model.
func (h *harness) wait(ki int, cost int64, mode int) {
	h.tb.Helper()
	k := keys[ki]
	h.record("Wait", ki, cost, int64(mode))
	now := h.now()
	before := h.peek(ki)
	valid := cost >= 0 && cost <= h.limit
	// slot: how long a Wait for cost must sleep before its request may
	// start. Token bucket and windows: 0 if AllowN admits it now, else
	// RetryAfter. Leaky bucket: the request's turn starts when the queue
	// ahead has drained, so after the debt, even if AllowN would admit it
	// now with a Delay.
	var slot int64
	if valid && cost > 0 {
		if h.algo == leakyBucket {
			slot = int64(before.ResetAfter)
		} else {
			c := hotlimit.NewManualClock()
			c.Set(time.Duration(now))
			if d := h.model.Clone(c).AllowN(k, cost); !d.Allowed {
				slot = int64(d.RetryAfter)
			}
		}
	}
	immediate := valid && mode != waitExpired && cost > 0 && slot == 0
	for _, l := range []*hotlimit.Limiter{h.lim, h.twin} {
		err := runWait(l, k, cost, mode, slot)
		var ok bool
		switch {
		case errors.Is(err, context.Canceled):
			h.fail("Wait(%q, %d) mode %d at %d blocked (slot %d): the watchdog cancelled it", k, cost, mode, now, slot)
		case !valid:
			// (The semantics do not order the two checks.)
			ok = errors.Is(err, hotlimit.ErrInvalidCost) || mode == waitExpired && errors.Is(err, context.DeadlineExceeded)
		case mode == waitExpired:
			ok = errors.Is(err, context.DeadlineExceeded) || cost == 0 && err == nil
		case cost == 0 || slot == 0:
			ok = err == nil
		default:
			// The deadline is before the slot: fail at once without
			// consuming. If the deadline passes before Wait looks at the
			// context, the context's own error is just as right.
			ok = errors.Is(err, hotlimit.ErrDeadline) || errors.Is(err, context.DeadlineExceeded)
		}
		if !ok {
			h.fail("Wait(%q, %d) mode %d at %d (slot %d, peek %+v) returned %v", k, cost, mode, now, slot, before, err)
		}
	}
	switch {
	case immediate:
		d := h.model.AllowN(k, cost)
		if !d.Allowed || d.Delay != 0 {
			h.fail("Wait(%q, %d) at %d admitted at once, but the model decides %+v", k, cost, now, d)
		}
		h.allowed++
		h.admitted(ki, cost, 0, now)
	case valid && mode != waitExpired && cost > 0:
		h.deniedHi++ // counted unless the deadline passed first
		fallthrough
	default:
		if after := h.peek(ki); after != before {
			h.fail("failed Wait(%q, %d) mode %d at %d changed the state: peek before %+v, after %+v", k, cost, mode, now, before, after)
		}
	}
}

// runWait calls l.Wait with the context that mode and slot call for. A
// watchdog cancels the context if Wait blocks, which no path driven here
// may do; the caller reports context.Canceled as that failure.
func runWait(l *hotlimit.Limiter, key string, cost int64, mode int, slot int64) error {
	bg := context.Background()
	var ctx context.Context
	var cancel context.CancelFunc
	switch {
	case mode == waitExpired:
		ctx, cancel = context.WithDeadline(bg, time.Now().Add(-time.Second))
	case slot == 0 && mode == waitJustBefore:
		ctx, cancel = context.WithCancel(bg)
	case slot == 0:
		ctx, cancel = context.WithDeadline(bg, time.Now().Add(time.Hour))
	case mode == waitHalfway:
		ctx, cancel = context.WithDeadline(bg, time.Now().Add(time.Duration(slot/2)))
	default:
		ctx, cancel = context.WithDeadline(bg, time.Now().Add(time.Duration(slot-1)))
	}
	defer cancel()
	watchdog := time.AfterFunc(10*time.Second, cancel)
	defer watchdog.Stop()
	return l.Wait(ctx, key, cost)
}

// advance moves the clock forward by d ≥ 0. For a window policy in ring
// mode (params.horizon > 0) it plays the background sweeper that the
// semantics rely on to remove idle keys before their index is misread: if the
// advance would leave a held key idle for the horizon, it first moves the
// clock to where that key is fresh, sweeps both limiters there, and then
// moves the rest of the way.
func (h *harness) advance(d int64) {
	h.tb.Helper()
	if d < 0 {
		h.tb.Fatalf("harness: negative advance %d", d)
	}
	defer func() { h.maxSeen = max(h.maxSeen, h.now()) }()
	if h.stale && h.horizon > 0 {
		// Nothing is swept in this mode: stop short of leaving a held
		// key idle for the horizon.
		target := satAdd(int64(h.clock.Now()), d)
		for ki := range keys {
			if h.present[ki] {
				target = min(target, satMul(h.lastAdmit[ki]/h.w+h.horizon, h.w)-1)
			}
		}
		target = max(target, int64(h.clock.Now()))
		h.record("Advance", 0, 0, target-int64(h.clock.Now()))
		h.clock.Set(time.Duration(target))
		return
	}
	if h.horizon > 0 {
		target := min(satAdd(int64(h.clock.Now()), d), maxTime)
		var r int64
		atRisk := false
		for ki := range keys {
			if (h.present[ki] || h.presentTwin[ki]) && target/h.w-h.lastAdmit[ki]/h.w >= h.horizon {
				atRisk = true
				r = max(r, int64(h.model.Peek(keys[ki]).ResetAfter))
			}
		}
		if atRisk {
			if r > d {
				h.fail("harness: a key at risk of misreading is fresh only in %d, after the advance of %d", r, d)
			}
			if r > 0 {
				h.record("Advance", 0, 0, r)
				h.clock.Advance(time.Duration(r))
				d -= r
			}
			h.sweep()
			h.sweepTwin()
		}
	}
	h.record("Advance", 0, 0, d)
	h.clock.Advance(time.Duration(d))
}

// setBack sets the clock back by d ≥ 0 (not below 0), a stale reading.
// For a window policy in ring mode it stays within the horizon of the
// latest reading: further is outside the contract (window.go).
func (h *harness) setBack(d int64) {
	h.tb.Helper()
	t := max(0, h.now()-d)
	if h.horizon > 0 {
		t = min(h.now(), max(t, satMul(max(0, h.maxSeen/h.w-h.horizon+1), h.w)))
	}
	h.record("SetBack", 0, 0, h.now()-t)
	h.clock.Set(time.Duration(t))
}

// removable returns the keys in present that are fresh now, per the model.
func (h *harness) removable(present *[len(keys)]bool) (n int) {
	for ki := range keys {
		if present[ki] && h.model.Peek(keys[ki]).ResetAfter == 0 {
			present[ki] = false
			n++
		}
	}
	return n
}

// sweep runs lim.Sweep: it must remove exactly the held keys that are fresh.
func (h *harness) sweep() {
	h.tb.Helper()
	h.record("Sweep", 0, 0, 0)
	n := h.lim.Sweep()
	want := h.removable(&h.present)
	if n != want && !(h.bgSweep && n <= want) {
		h.fail("Sweep at %d removed %d keys, want %d (the fresh ones)", h.now(), n, want)
	}
	h.swept += uint64(n)
}

// sweepTwin sweeps the twin, as before every operation.
func (h *harness) sweepTwin() {
	h.tb.Helper()
	if h.stale {
		return
	}
	n := h.twin.Sweep()
	if want := h.removable(&h.presentTwin); n != want {
		h.fail("twin Sweep at %d removed %d keys, want %d (the fresh ones)", h.now(), n, want)
	}
	h.sweptTwin += uint64(n)
}

// endOp checks what must hold between operations: all three subjects
// report the same state for every key, and the limiters hold exactly the
// keys they should.
func (h *harness) endOp() {
	h.tb.Helper()
	nonFresh := 0
	for ki := range keys {
		if h.peek(ki).ResetAfter > 0 {
			nonFresh++
		}
	}
	count := func(p *[len(keys)]bool) (n int) {
		for _, b := range p {
			if b {
				n++
			}
		}
		return n
	}
	n := h.lim.Len()
	if h.bgSweep {
		if n < nonFresh || n > count(&h.present) {
			h.fail("Len() = %d at %d, want between %d (keys not fresh) and %d (keys admitted)", n, h.now(), nonFresh, count(&h.present))
		}
	} else {
		if want := count(&h.present); n != want {
			h.fail("Len() = %d at %d, want %d", n, h.now(), want)
		}
		if st := h.lim.Stats(); st.Keys != uint64(n) || st.Swept != h.swept || st.Evicted != 0 {
			h.fail("Stats() = %+v at %d, want Keys %d, Swept %d, Evicted 0", st, h.now(), n, h.swept)
		}
	}
	n = h.twin.Len()
	if want := count(&h.presentTwin); n != want {
		h.fail("twin Len() = %d at %d, want %d", n, h.now(), want)
	}
	st := h.twin.Stats()
	if st.Keys != uint64(n) || st.Swept != h.sweptTwin || st.Evicted != 0 ||
		st.Allowed != h.allowed || st.Denied < h.deniedLo || st.Denied > h.deniedHi {
		h.fail("twin Stats() = %+v at %d, want Keys %d, Swept %d, Evicted 0, Allowed %d, Denied in [%d, %d]",
			st, h.now(), n, h.sweptTwin, h.allowed, h.deniedLo, h.deniedHi)
	}
}

// envelope checks each admission against the most the algorithm may
// admit, from the history of admissions alone (neither the limiter nor the
// model is consulted).
//
// Token bucket (GCRA with interval T and burst B): over every closed
// interval [a, b], the admitted cost C ≤ B + ⌊(b−a)/T⌋. Proof: let the
// admissions in [a, b] be at t1 ≤ … ≤ tk. Each one sets TAT to
// max(TAT, t) + c·T ≥ TAT + c·T, and the first starts from max(TAT, t1) ≥ a,
// so after the last one TAT ≥ a + C·T. The last one was admitted, so
// TAT − tk ≤ B·T, hence a + C·T ≤ b + B·T, and C is an integer. (The
// bound B + ⌊N·(b−a)/Per⌋ follows, since T ≥ Per/N.) The bound is
// checked for every interval that ends at an admission and starts at an
// earlier one, which are the tightest intervals.
//
// Leaky bucket: admission is the same test with B = Capacity+1, so the
// same envelope holds. Besides, the slots it hands out never overlap: an
// admission of cost c with Delay δ at t occupies [t+δ, t+δ+c·T), which
// starts no earlier than the previous admission's slots end.
//
// Fixed window: at most Limit per aligned window [k·W, (k+1)·W).
//
// Sliding-window counter: at most Limit per aligned window too (the
// current count q never exceeds it), and over every interval [a, b] of
// length d = b−a ≤ W, C ≤ Limit + Limit·d/W. Proof: let b, the last
// admission, fall in window k at offset e. If a ≥ k·W, C ≤ q ≤ Limit.
// Otherwise a is in window k−1 (d ≤ W) and e < d. The admissions in window
// k up to b number q_b, with p·(W−e) + q_b·W ≤ Limit·W (b's admission
// test, p the count of window k−1), and those in [a, k·W) number at most p.
// So C·W ≤ p·W + Limit·W − p·(W−e) = Limit·W + p·e ≤ Limit·W + Limit·d.
// This is tight up to a nanosecond (Limit at the very end of window k−1,
// then ⌊Limit·e/W⌋ by offset e), so up to 2·Limit−1 pass in a sliding
// interval of length W; the bound is checked as C·W ≤ Limit·(W+d), exactly.
type envelope struct {
	params
	hist    [len(keys)][]admission
	slotEnd [len(keys)]int64 // leaky: where the last admission's slots end
}

type admission struct{ t, cost int64 }

func newEnvelope(p params) *envelope { return &envelope{params: p} }

// admit records an admission of cost at t with Delay delay and returns a
// description of the violated bound, or "".
func (e *envelope) admit(ki int, t, cost, delay int64) string {
	h := append(e.hist[ki], admission{t, cost})
	e.hist[ki] = h
	last := len(h) - 1
	switch e.algo {
	case tokenBucket, leakyBucket:
		if e.algo == leakyBucket {
			start := t + delay
			if start < e.slotEnd[ki] {
				return fmt.Sprintf("its slots start at %d, before the previous admission's end at %d", start, e.slotEnd[ki])
			}
			e.slotEnd[ki] = start + cost*e.t
		}
		sum := int64(0)
		for i := last; i >= 0; i-- {
			sum = satAdd(sum, h[i].cost)
			d := t - h[i].t
			if bound := e.limit + d/e.t; sum > bound {
				return fmt.Sprintf("cost %d admitted in [%d, %d], more than Limit + ⌊%d/T⌋ = %d", sum, h[i].t, t, d, bound)
			}
		}
	case fixedWindow, slidingWindow:
		k := t / e.w
		sum := int64(0)
		for i := last; i >= 0; i-- {
			d := t - h[i].t
			if h[i].t/e.w != k && (e.algo == fixedWindow || d > e.w) {
				break
			}
			sum = satAdd(sum, h[i].cost)
			if h[i].t/e.w == k && sum > e.limit {
				return fmt.Sprintf("cost %d admitted in window %d, more than Limit %d", sum, k, e.limit)
			}
			if e.algo == slidingWindow && d <= e.w && !le128(sum, e.w, e.limit, e.w+d) {
				return fmt.Sprintf("cost %d admitted in [%d, %d], more than Limit·(1 + %d/W) = %d·(1 + %d/%d)", sum, h[i].t, t, d, e.limit, d, e.w)
			}
		}
	}
	return ""
}
