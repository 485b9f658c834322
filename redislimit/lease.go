package redislimit

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/luasrc"
)

//go:embed lease.lua
var leaseSource string

// leaseScript takes and gives back a lease's units: luasrc.Start, the
// incarnation functions, then lease.lua.
var leaseScript = newScript(luasrc.Start + luasrc.Incarnation + leaseSource)

// never is a grant's end when it has none (a token bucket's lease).
const never = math.MaxInt64

// leases decides a Limiter's requests in lease mode (WithLeases): from
// units it leases from the key's state in Redis, debited there before
// they are spent here (see the package doc, "Leases"). Every call to
// Redis goes through the Limiter (its routing, circuit, timeout, hooks
// and failure policy).
type leases struct {
	l        *Limiter
	maxLease int64
	period   int64 // ns
	clock    hotlimit.Clock
	keys     sync.Map // key → *leaseEntry
	closed   atomic.Bool
	bg       sync.WaitGroup // background refills
}

// leaseEntry is one key's lease on this instance.
type leaseEntry struct {
	cur  atomic.Pointer[grant]
	busy atomic.Bool // a take or give for this key is in flight
	dead atomic.Bool // removed by sweep: look the key up again

	deny atomic.Pointer[leaseDenial] // Redis's last denial of a take for this key, or nil

	issued atomic.Int64 // units ever granted into the lease

	// Guarded by busy.
	stamp     int64 // what the last take into the lease replied (TAT or window index)
	inc       int64 // and the incarnation of the key's state it was taken from (lease.lua)
	lastGrant int64 // units of that take still undoable by a give
	lastAt    int64 // clock ns of the previous refill
	lastSpent int64 // units spent by then

	swept atomic.Int64 // units spent at the previous sweep

	resetAt atomic.Int64 // clock ns: when the shared state was fresh again as of the last take (token bucket)
}

// leaseDenial is a take Redis refused: it refuses every take of at least
// cost until the clock reads until (ns), unless units are given back
// meanwhile.
type leaseDenial struct{ until, cost int64 }

// grant is a lease: units that Redis debited and that may be spent here
// until end (clock ns; never for a token bucket).
type grant struct {
	avail atomic.Int64
	low   atomic.Int64 // a refill is sent when avail drops to low
	end   int64
	win   int64 // the window index (fixed window)
}

var deadGrant = &grant{}

// newLeases returns the lease mode of l, whose policy must be a token
// bucket or a fixed window (l.spec), with maxLease units at most held per
// key (0: a tenth of the limit, at least 1) and leases sized to last
// period (0: 100ms).
func newLeases(l *Limiter, policy hotlimit.Policy, maxLease int64, period time.Duration) (*leases, error) {
	if l.spec.kind != kindTokenBucket && l.spec.kind != kindFixedWindow || l.spec.leaky {
		return nil, fmt.Errorf("redislimit: WithLeases: policy %T is not supported (use hotlimit.TokenBucket or FixedWindow)", policy)
	}
	if maxLease == 0 {
		maxLease = max(1, l.spec.limit/10)
	}
	if period == 0 {
		period = 100 * time.Millisecond
	}
	return &leases{l: l, maxLease: min(maxLease, l.spec.limit), period: int64(period), clock: hotlimit.SystemClock{}}, nil
}

// decide decides a request of cost units on key, spending them if it is
// admitted (see WithLeases for what its Decision says): in process while
// the key's lease holds cost units, without a lock, an allocation or a
// round trip; otherwise after one take from Redis. It also returns, for
// an admission, the grant the units were spent from, to which a layered
// call may give them back (a later layer refused); nil when nothing was
// spent from one.
func (ls *leases) decide(ctx context.Context, key string, cost int64) (hotlimit.Decision, *grant, error) {
	if cost <= 0 || cost > ls.l.spec.limit {
		if cost == 0 {
			return ls.peek(key), nil, nil
		}
		return hotlimit.Decision{Limit: ls.l.spec.limit, RetryAfter: hotlimit.Never}, nil, nil
	}
	e := ls.lookup(key)
	if e != nil {
		// The bucket's reset as of the last take before this decision:
		// spend may start a refill, whose take would be after it.
		at := e.resetAt.Load()
		if g, a, ok := ls.spend(e, key, cost); ok {
			now := int64(ls.clock.Now())
			if g.end != never {
				at = g.end
			}
			return hotlimit.Decision{Allowed: true, Limit: ls.l.spec.limit, Remaining: a - cost, ResetAfter: time.Duration(max(0, at-now))}, g, nil
		}
	}
	return ls.slow(ctx, key, e, cost)
}

// spend takes cost units from e's lease if it holds them, in process, and
// reports the grant and the units it held before. It starts a refill in
// the background when the lease drops to its low-water mark. It reads the
// clock only for a fixed window (whose grant ends).
func (ls *leases) spend(e *leaseEntry, key string, cost int64) (*grant, int64, bool) {
	g := e.cur.Load()
	if g.end != never && int64(ls.clock.Now()) >= g.end {
		return nil, 0, false
	}
	for {
		a := g.avail.Load()
		if a < cost {
			return nil, 0, false
		}
		if g.avail.CompareAndSwap(a, a-cost) {
			if a-cost <= g.low.Load() && !e.busy.Load() {
				ls.startRefill(e, key)
			}
			return g, a, true
		}
	}
}

// resetAfter is Decision.ResetAfter for e at now, whose grant is g.
func (ls *leases) resetAfter(e *leaseEntry, g *grant, now int64) time.Duration {
	at := e.resetAt.Load()
	if g.end != never {
		at = g.end
	}
	return time.Duration(max(0, at-now))
}

// held returns the units e's grant holds and may spend at now, and the
// grant.
func (e *leaseEntry) held(now int64) (int64, *grant) {
	g := e.cur.Load()
	if g.end != never && now >= g.end {
		return 0, g
	}
	return g.avail.Load(), g
}

// peek is decide of cost 0: admitted, spending nothing, with the state
// the lease holds.
func (ls *leases) peek(key string) hotlimit.Decision {
	d := hotlimit.Decision{Allowed: true, Limit: ls.l.spec.limit}
	if e := ls.lookup(key); e != nil {
		now := int64(ls.clock.Now())
		var g *grant
		d.Remaining, g = e.held(now)
		d.ResetAfter = ls.resetAfter(e, g, now)
	}
	return d
}

// after returns the Decision of a request on e decided at now: admitted
// or not, with the lease's state as it is now and, when denied, the wait
// Redis gave (retry, ns from now; Never when it can never be admitted).
func (ls *leases) after(e *leaseEntry, now int64, ok bool, retry time.Duration) hotlimit.Decision {
	rem, g := e.held(now)
	d := hotlimit.Decision{Allowed: ok, Limit: ls.l.spec.limit, Remaining: rem, ResetAfter: ls.resetAfter(e, g, now)}
	if !ok {
		d.RetryAfter = max(retry, 1)
	}
	return d
}

// lookup returns key's entry, or nil. A sync.Map's Load of a key that is
// present takes no lock and, for a string key, allocates nothing.
func (ls *leases) lookup(key string) *leaseEntry {
	if v, ok := ls.keys.Load(key); ok {
		return v.(*leaseEntry)
	}
	return nil
}

// entryFor returns key's entry, adding it if absent.
func (ls *leases) entryFor(key string) *leaseEntry {
	if e := ls.lookup(key); e != nil {
		return e
	}
	e := &leaseEntry{lastAt: int64(ls.clock.Now())}
	e.cur.Store(deadGrant)
	v, _ := ls.keys.LoadOrStore(key, e)
	return v.(*leaseEntry)
}

// spent returns the units spent from e's leases so far.
func (e *leaseEntry) spent() int64 {
	g := e.cur.Load()
	return e.issued.Load() - g.avail.Load()
}

// startRefill sends a background take for key if none is in flight.
func (ls *leases) startRefill(e *leaseEntry, key string) {
	if !e.busy.CompareAndSwap(false, true) {
		return
	}
	if ls.closed.Load() {
		e.busy.Store(false)
		return
	}
	ls.bg.Add(1)
	go func() {
		defer ls.bg.Done()
		defer e.busy.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), ls.l.timeout)
		defer cancel()
		ls.refill(ctx, e, key, 0)
	}()
}

// want returns the units a take should ask for beyond need: the key's
// rate over the last refill interval scaled to a period, so that held +
// need + want ≤ maxLease. Called with busy held.
func (ls *leases) want(e *leaseEntry, need int64) int64 {
	now := int64(ls.clock.Now())
	spent := e.spent()
	// The units spent since the previous refill, scaled from the time
	// they took to a period; all of them at once (dt 0) is a rate above
	// any bound, and no units spent, or no history, asks for 1.
	w, ds := int64(1), spent-e.lastSpent
	if dt := now - e.lastAt; ds > 0 && dt <= 0 {
		w = ls.maxLease
	} else if ds > 0 {
		w = int64(min(math.Ceil(float64(ds)*float64(ls.period)/float64(dt)), float64(ls.maxLease)))
	}
	e.lastAt, e.lastSpent = now, spent
	held := int64(0)
	if g := e.cur.Load(); g.end == never || now < g.end {
		held = g.avail.Load()
	}
	w = min(max(w, 1), ls.maxLease-held-need)
	return max(w, 0)
}

// refill takes up to want units into e's lease, need of them for the
// caller (spent at once) and the rest kept. It reports whether need was
// granted. Called with busy held.
func (ls *leases) refill(ctx context.Context, e *leaseEntry, key string, need int64) (bool, error) {
	w := ls.want(e, need)
	if need == 0 && w == 0 {
		return false, nil
	}
	sent := int64(ls.clock.Now())
	r, err := ls.take(ctx, key, max(need, 1), need+w)
	if err != nil {
		return false, err
	}
	if r.granted == 0 {
		ls.denied(e, sent, need, r.retry)
		return false, nil
	}
	keep := r.granted - need
	e.issued.Add(r.granted) // need is spent at once
	if ls.l.spec.kind == kindTokenBucket {
		g := e.cur.Load()
		if g == deadGrant {
			g = &grant{end: never}
			g.avail.Store(keep)
			e.cur.Store(g)
		} else {
			g.avail.Add(keep)
		}
		if keep > 0 {
			g.low.Store(keep / 2)
		}
		e.stamp, e.inc, e.lastGrant = r.stamp, r.inc, keep
		e.resetAt.Store(sent + r.left*int64(time.Microsecond))
		return true, nil
	}
	g := e.cur.Load()
	if g != deadGrant && g.win == r.stamp && sent < g.end {
		g.avail.Add(keep)
		if r.inc == e.inc {
			e.lastGrant += keep
		} else {
			// The state was deleted (Reset) and created again since the
			// last take: only this take's units are owed by it.
			e.lastGrant = keep
		}
	} else {
		// A new window, or the same one after this instance's deadline
		// for it (which comes a round trip early at most): the old
		// lease's units are dead; dropping them from issued keeps
		// spent() right.
		ng := &grant{end: sent + r.left*int64(time.Microsecond), win: r.stamp}
		ng.avail.Store(keep)
		e.issued.Add(-g.avail.Swap(0))
		e.cur.Store(ng)
		g = ng
		e.lastGrant = keep
	}
	if keep > 0 {
		g.low.Store(keep / 2)
	}
	e.stamp, e.inc = r.stamp, r.inc
	return true, nil
}

// denied notes that Redis refused cost units until retry µs after sent:
// until then this instance denies requests of at least cost locally.
func (ls *leases) denied(e *leaseEntry, sent, cost, retry int64) {
	if cost > 0 && retry > 0 {
		e.deny.Store(&leaseDenial{until: sent + retry*int64(time.Microsecond), cost: cost})
	}
}

// slow decides a request the lease could not: one take from Redis.
func (ls *leases) slow(ctx context.Context, key string, e *leaseEntry, cost int64) (hotlimit.Decision, *grant, error) {
	if ls.closed.Load() {
		return hotlimit.Decision{Limit: ls.l.spec.limit, RetryAfter: hotlimit.Never}, nil, ErrClosed
	}
	if e == nil || e.dead.Load() {
		e = ls.entryFor(key)
	}
	now := int64(ls.clock.Now())
	// Redis's denial of this same cost answers until it ends: a larger
	// cost needs longer, by a wait only Redis can say.
	if d := e.deny.Load(); d != nil && now < d.until && cost == d.cost {
		return ls.after(e, now, false, time.Duration(d.until-now)), nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ls.l.timeout)
	defer cancel()
	if e.busy.CompareAndSwap(false, true) {
		if e.dead.Load() { // swept meanwhile: units taken now would be lost
			e.busy.Store(false)
			return ls.slow(ctx, key, nil, cost)
		}
		ok, err := ls.refill(ctx, e, key, cost)
		e.busy.Store(false)
		return ls.answer(e, key, cost, ok, err)
	}
	// A take is in flight for the lease; it may have landed.
	if g := e.cur.Load(); g.end == never || now < g.end {
		for a := g.avail.Load(); a >= cost; a = g.avail.Load() {
			if g.avail.CompareAndSwap(a, a-cost) {
				return hotlimit.Decision{Allowed: true, Limit: ls.l.spec.limit, Remaining: a - cost, ResetAfter: ls.resetAfter(e, g, now)}, g, nil
			}
		}
	}
	// Take exactly cost.
	r, err := ls.take(ctx, key, cost, cost)
	if err == nil && r.granted == 0 {
		ls.denied(e, now, cost, r.retry)
	}
	if err == nil && r.granted > 0 && ls.l.spec.kind == kindTokenBucket {
		e.resetAt.Store(now + r.left*int64(time.Microsecond))
	}
	return ls.answer(e, key, cost, r.granted > 0, err)
}

// answer returns the Decision of a request of cost on key, which a take
// decided (ok) or could not decide (err: the failure policy answers), and
// the grant an admission's units may be given back to.
func (ls *leases) answer(e *leaseEntry, key string, cost int64, ok bool, err error) (hotlimit.Decision, *grant, error) {
	if err != nil {
		d, _ := failDecision([]Layer{{Limiter: ls.l, Key: key, Cost: cost}}, ls.l.rt.addr)
		if h := ls.l.hooks; h != nil && h.Failure != nil {
			h.Failure(ls.l.name, d, err)
		}
		return d, nil, err
	}
	now := int64(ls.clock.Now())
	var retry time.Duration
	if d := e.deny.Load(); !ok && d != nil && d.cost == cost {
		retry = time.Duration(d.until - now)
	}
	var g *grant
	if ok {
		// The units were spent as they were taken; they may go back into
		// the key's grant (never into the shared deadGrant: no lease).
		if g = e.cur.Load(); g == deadGrant {
			g = nil
		}
	}
	return ls.after(e, now, ok, retry), g, nil
}

// call runs lease.lua on key's Redis key and incarnation key with args,
// through the Limiter's routing, circuit, timeout and Call hook; its error
// wraps ErrUnavailable, and the Failure hook does not see it (answer
// reports it).
func (ls *leases) call(ctx context.Context, key string, args ...any) ([]int64, error) {
	return ls.l.callQuiet(ctx, leaseScript, []string{ls.l.RedisKey(key), ls.l.incKey(key)}, args...)
}

// takeReply is what lease.lua replied to a take.
type takeReply struct {
	granted, stamp, left, retry, inc int64
}

// now is the script's instant argument: "" for the server's TIME.
func (ls *leases) now() string {
	if ls.l.testNow != nil {
		return strconv.FormatInt(ls.l.testNow(), 10)
	}
	return ""
}

// take asks Redis for want units of key's state, at least lo.
func (ls *leases) take(ctx context.Context, key string, lo, want int64) (takeReply, error) {
	v, err := ls.call(ctx, key, ls.now(), "take", ls.l.argv[0], ls.l.argv[1], ls.l.argv[2], ls.l.argv[3], lo, want)
	if err != nil {
		return takeReply{}, err
	}
	switch {
	case len(v) == 2 && v[0] == 0:
		return takeReply{retry: v[1]}, nil
	case len(v) == 4 && v[0] >= lo && v[0] <= want:
		return takeReply{granted: v[0], stamp: v[1], left: v[2], inc: v[3]}, nil
	}
	return takeReply{}, fmt.Errorf("%w: unexpected reply %v", ErrUnavailable, v)
}

// giveBack returns e's unspent units to Redis where the policy allows it
// (see the package doc) and empties the lease. Called with busy held.
func (ls *leases) giveBack(ctx context.Context, e *leaseEntry, key string) error {
	g := e.cur.Load()
	r := min(g.avail.Swap(0), e.lastGrant)
	e.lastGrant = 0
	if r <= 0 || (g.end != never && int64(ls.clock.Now()) >= g.end) {
		return nil
	}
	_, err := ls.call(ctx, key, ls.now(), "give", ls.l.argv[0], ls.l.argv[1], ls.l.argv[2], ls.l.argv[3], r, e.stamp, e.inc)
	return err
}

// sweep gives back the leases of keys on which nothing was spent since
// the previous sweep and forgets those keys (Limiter.SweepLeases).
func (ls *leases) sweep(ctx context.Context) error {
	var first error
	for k, v := range ls.keys.Range {
		key, e := k.(string), v.(*leaseEntry)
		sp := e.spent()
		if e.swept.Swap(sp) != sp || !e.busy.CompareAndSwap(false, true) {
			continue
		}
		e.dead.Store(true)
		ls.keys.CompareAndDelete(key, e)
		if err := ls.giveBack(ctx, e, key); err != nil && first == nil {
			first = err
		}
		e.busy.Store(false)
	}
	return first
}

// close waits for the refills in flight, then gives back every unspent
// lease (where the policy allows) and denies later requests with
// ErrClosed (Limiter.Close).
func (ls *leases) close(ctx context.Context) error {
	if ls.closed.Swap(true) {
		return nil
	}
	ls.bg.Wait()
	var first error
	for k, v := range ls.keys.Range {
		if err := ls.giveBack(ctx, v.(*leaseEntry), k.(string)); err != nil && first == nil {
			first = err
		}
	}
	return first
}
