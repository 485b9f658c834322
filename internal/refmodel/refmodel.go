// Package refmodel holds deliberately simple reference models of
// hotlimit's algorithms: one mutex, a map from key to unpacked state, and
// the formulas of docs/semantics.md written as plainly as possible (big integers
// where a product could overflow, a search where the fast path solves an
// equation). Tests and fuzz targets run the same operations through a
// model and a hotlimit.Limiter and require identical decisions.
package refmodel

import (
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hotlimit/hotlimit"
)

// maxTime mirrors the limiter's clock saturation (2^62−1 ns).
const maxTime = 1<<62 - 1

// Model is a reference limiter driven by an explicit clock.
type Model struct {
	mu    sync.Mutex
	clock hotlimit.Clock
	kind  string
	limit int64
	t     int64 // emission interval (buckets)
	w     int64 // window length (windows)
	tat   map[string]int64
	win   map[string]*winState
	log   map[string]*logState
	// gen counts each key's removals: the incarnation of its state, which
	// an Admission names. String leaves it out: only GiveBack reads it.
	gen map[string]int64
	// ren counts each key's renewals: a bucket give-back that moves later
	// admissions' units back in time renews the key's state (hotlimit's
	// shard.go, "Renewals"), and an Admission of an earlier renewal is
	// then given back as grp, the key's latest renewals and floor, moved
	// it. String leaves ren out for keys it does not hold.
	ren map[string]int64
	grp map[string]*renewals
	// epoch counts SetPolicy's changes of window length: an Admission
	// counted in a window of another length gives nothing back.
	epoch int64

	// sweptAt is the latest instant a key removed as fresh (by Sweep, by
	// a refund that left it fresh, by eviction) was fresh from: a bucket's
	// TAT, the end of a window state's last counted window (its window's
	// start with no counts), a log's latest write or newest instant's
	// expiry. A key the model does not hold is decided as owing until
	// then: a bucket as TAT sweptAt, a window as an empty state in
	// sweptAt's window, a log no earlier than sweptAt, as the limiter
	// decides a key it holds no entry for (hotlimit's params.go, vacant).
	sweptAt int64
	at      int64 // the instant the latest decision was made at (AllowNAt)
	// high is the latest reading the model has read: modelling a limiter
	// on a ManualClock (OnManualClock), a bucket give-back below later
	// admissions gives back at no earlier reading, as the limiter does on
	// one set back (hotlimit's refund.go, giveBackNow, which reads the
	// latest reading the clock has returned).
	high   int64
	manual bool // see high and OnManualClock
}

// logState is a sliding log: every admitted unit's instant, and the latest
// instant the key was written at (a reading older than that is decided
// there).
type logState struct {
	at   []int64
	last int64
}

type winState struct {
	k    int64 // full window index of cur
	prev int64 // count in window k-1
	cur  int64 // count in window k
}

// New returns a model of policy reading time from clock. The policy must
// be valid (check it with hotlimit.New first).
func New(policy hotlimit.Policy, clock hotlimit.Clock) *Model {
	m := &Model{clock: clock, tat: map[string]int64{}, win: map[string]*winState{}, log: map[string]*logState{}, gen: map[string]int64{}, ren: map[string]int64{}, grp: map[string]*renewals{}}
	switch p := policy.(type) {
	case hotlimit.TokenBucket:
		m.kind, m.limit, m.t = "tb", p.Burst, ceilDiv(int64(p.Rate.Per), p.Rate.N)
	case hotlimit.LeakyBucket:
		m.kind, m.limit, m.t = "leaky", p.Capacity+1, ceilDiv(int64(p.Rate.Per), p.Rate.N)
	case hotlimit.FixedWindow:
		m.kind, m.limit, m.w = "fixed", p.Limit, int64(p.Window)
	case hotlimit.SlidingWindow:
		m.kind, m.limit, m.w = "sliding", p.Limit, int64(p.Window)
	case hotlimit.SlidingLog:
		m.kind, m.limit, m.w = "log", p.Limit, int64(p.Window)
	default:
		panic(fmt.Sprintf("refmodel: unsupported policy %T", policy))
	}
	return m
}

func ceilDiv(a, b int64) int64 { return (a-1)/b + 1 } // a, b > 0; no overflow

// OnManualClock makes m model a limiter whose clock is a ManualClock,
// which may be set back: a bucket give-back below later admissions then
// gives back at the latest reading m has read, as the limiter does at the
// latest reading its ManualClock has returned (hotlimit's refund.go,
// giveBackNow). Without it, m models a limiter on any other Clock, which
// reads the clock as it is. It returns m.
func (m *Model) OnManualClock() *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.manual = true
	return m
}

// Limit returns the policy's capacity.
func (m *Model) Limit() int64 { return m.limit }

// Allow is AllowN(key, 1).
func (m *Model) Allow(key string) hotlimit.Decision { return m.AllowN(key, 1) }

func (m *Model) now() int64 {
	t := min(max(int64(m.clock.Now()), 0), maxTime)
	m.high = max(m.high, t)
	return t
}

// AllowN decides as docs/semantics.md specifies.
func (m *Model) AllowN(key string, cost int64) hotlimit.Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if cost < 0 || cost > m.limit || len(key) > hotlimit.MaxKeyLen {
		d := hotlimit.Decision{Limit: m.limit}
		if len(key) <= hotlimit.MaxKeyLen {
			d = m.decide(key, now, 0, false)
		}
		d.Allowed, d.RetryAfter, d.Delay = false, hotlimit.Never, 0
		return d
	}
	return m.decide(key, now, cost, true)
}

// Peek reports key's state without changing it.
func (m *Model) Peek(key string) hotlimit.Decision {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.decide(key, m.now(), 0, false)
}

func (m *Model) decide(key string, now, cost int64, write bool) hotlimit.Decision {
	if m.kind == "log" && !m.holds(key) {
		now = max(now, m.sweptAt) // a new entry: see sweptAt
	}
	m.at = now
	switch m.kind {
	case "tb", "leaky":
		return m.bucket(key, now, cost, write)
	case "log":
		return m.slidingLog(key, now, cost, write)
	default:
		return m.window(key, now, cost, write)
	}
}

func (m *Model) bucket(key string, now, cost int64, write bool) hotlimit.Decision {
	T := m.t
	burst := m.limit * T
	tat := max(m.tatOf(key), now) // TAT never goes back
	debt := tat - now
	rem := func(debt int64) int64 {
		if debt >= burst {
			return 0
		}
		return (burst - debt) / T
	}
	if cost == 0 {
		return hotlimit.Decision{Allowed: true, Limit: m.limit, Remaining: rem(debt), ResetAfter: time.Duration(debt)}
	}
	newTAT := tat + cost*T
	if newTAT-now > burst {
		return hotlimit.Decision{Limit: m.limit, Remaining: rem(debt), RetryAfter: time.Duration(newTAT - burst - now), ResetAfter: time.Duration(debt)}
	}
	if write {
		m.tat[key] = newTAT
	}
	d := hotlimit.Decision{Allowed: true, Limit: m.limit, Remaining: rem(newTAT - now), ResetAfter: time.Duration(newTAT - now)}
	if m.kind == "leaky" {
		d.Delay = time.Duration(debt)
	}
	return d
}

// tatOf returns key's TAT: for a key the model does not hold, sweptAt.
func (m *Model) tatOf(key string) int64 {
	if t, ok := m.tat[key]; ok {
		return t
	}
	return m.sweptAt
}

// counts returns the window index, elapsed time and counts (prev, cur) of
// key's state at now, rolled forward; a state newer than now, with counts
// or without, is read at the start of its own window. A key the model
// does not hold is an empty state in sweptAt's window.
func (m *Model) counts(key string, now int64) (k, e, prev, cur int64) {
	k, e = now/m.w, now%m.w
	s := m.win[key]
	switch {
	case s == nil && m.sweptAt/m.w > k:
		return m.sweptAt / m.w, 0, 0, 0
	case s == nil:
		return k, e, 0, 0
	case s.k > k: // stale reading: no time has passed
		return s.k, 0, s.prev, s.cur
	case s.k == k:
		return k, e, s.prev, s.cur
	case s.k == k-1 && m.kind == "sliding":
		return k, e, s.cur, 0
	default:
		return k, e, 0, 0
	}
}

// admits reports whether cost fits at elapsed e with counts prev, cur,
// using exact big-integer arithmetic.
func (m *Model) admits(e, prev, cur, cost int64) bool {
	if m.kind == "fixed" {
		return cur+cost <= m.limit
	}
	W := big.NewInt(m.w)
	lhs := new(big.Int).Mul(big.NewInt(prev), big.NewInt(m.w-e))
	lhs.Add(lhs, new(big.Int).Mul(big.NewInt(cur+cost), W))
	rhs := new(big.Int).Mul(big.NewInt(m.limit), W)
	return lhs.Cmp(rhs) <= 0
}

// remainingAt counts, one unit at a time, how many more unit requests fit.
func (m *Model) remainingAt(e, prev, cur int64) int64 {
	if m.kind == "fixed" {
		return max(0, m.limit-cur) // cur > limit after SetPolicy lowered it
	}
	// ⌊(L·W − p·(W−e) − q·W)/W⌋, clamped at 0.
	W := big.NewInt(m.w)
	x := new(big.Int).Mul(big.NewInt(m.limit), W)
	x.Sub(x, new(big.Int).Mul(big.NewInt(prev), big.NewInt(m.w-e)))
	x.Sub(x, new(big.Int).Mul(big.NewInt(cur), W))
	if x.Sign() <= 0 {
		return 0
	}
	return x.Div(x, W).Int64()
}

func (m *Model) resetAt(e, prev, cur int64) int64 {
	switch {
	case cur > 0 && m.kind == "sliding":
		return 2*m.w - e
	case cur > 0 || prev > 0:
		return m.w - e
	}
	return 0
}

func (m *Model) window(key string, now, cost int64, write bool) hotlimit.Decision {
	k, e, prev, cur := m.counts(key, now)
	m.at = k*m.w + e
	if cost == 0 {
		return hotlimit.Decision{Allowed: true, Limit: m.limit, Remaining: m.remainingAt(e, prev, cur), ResetAfter: time.Duration(m.resetAt(e, prev, cur))}
	}
	if m.admits(e, prev, cur, cost) {
		cur += cost
		if write {
			m.win[key] = &winState{k: k, prev: prev, cur: cur}
		}
		return hotlimit.Decision{Allowed: true, Limit: m.limit, Remaining: m.remainingAt(e, prev, cur), ResetAfter: time.Duration(m.resetAt(e, prev, cur))}
	}
	return hotlimit.Decision{
		Limit:      m.limit,
		Remaining:  m.remainingAt(e, prev, cur),
		RetryAfter: time.Duration(m.searchRetry(k, e, prev, cur, cost)),
		ResetAfter: time.Duration(m.resetAt(e, prev, cur)),
	}
}

// searchRetry finds the smallest d > 0 at which cost is admitted, by binary
// search over [1, 2W]: admission only becomes easier as time passes.
func (m *Model) searchRetry(k, e, prev, cur, cost int64) int64 {
	ok := func(d int64) bool {
		t := e + d
		switch {
		case t < m.w:
			return m.admits(t, prev, cur, cost)
		case t < 2*m.w:
			if m.kind == "fixed" {
				return m.admits(t-m.w, 0, 0, cost)
			}
			return m.admits(t-m.w, cur, 0, cost)
		default:
			return m.admits(t%m.w, 0, 0, cost)
		}
	}
	lo, hi := int64(0), 2*m.w-e // ok(hi): both windows gone
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Clone returns an independent copy of m reading time from clock.
func (m *Model) Clone(clock hotlimit.Clock) *Model {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &Model{clock: clock, kind: m.kind, limit: m.limit, t: m.t, w: m.w, tat: map[string]int64{}, win: map[string]*winState{}, sweptAt: m.sweptAt, epoch: m.epoch, high: m.high, manual: m.manual}
	for k, v := range m.tat {
		c.tat[k] = v
	}
	for k, v := range m.win {
		s := *v
		c.win[k] = &s
	}
	c.log = map[string]*logState{}
	for k, v := range m.log {
		c.log[k] = &logState{at: append([]int64(nil), v.at...), last: v.last}
	}
	c.gen = maps.Clone(m.gen)
	c.ren = maps.Clone(m.ren)
	c.grp = map[string]*renewals{}
	for k, r := range m.grp {
		c.grp[k] = &renewals{ev: slices.Clone(r.ev), floored: r.floored, base: r.base, floor: r.floor}
	}
	return c
}

// Admission is an admission the model can give back, as hotlimit's
// Admission names its own: the key and its incarnation (how many times its
// state had been removed before, and for the buckets renewed: Ren), the
// cost, the instant it was decided at, for the buckets the TAT it left
// and the time it added to it (Span: cost·T at the rate it was decided
// at), and for the windows the epoch of the window length it was counted
// in.
type Admission struct {
	Key                 string
	Cost, At, End, Span int64
	Gen, Epoch, Ren     int64
}

// maxRenewals is how many renewals of a key a give-back looks back
// through exactly, as hotlimit's shard.go.
const maxRenewals = 16

// renewals are a bucket key's latest renewals, oldest first: the renewal
// count each ended (ren) and the time it removed, [at, at+span); and,
// once one was dropped, a floor for the Admissions older than them, from
// renewal count base on.
type renewals struct {
	ev      []renewal
	floored bool
	base    int64
	floor   int64
}

type renewal struct{ ren, at, span int64 }

// moved returns the time [from, to) of an Admission of renewal count ren,
// moved back by what each renewal since removed below it; for one older
// than the renewals kept, starting no later than the floor or any of
// theirs. ok is false if no renewal kept or floor covers it.
func (r *renewals) moved(ren, from, to int64) (int64, int64, bool) {
	for j, e := range r.ev {
		if e.ren != ren {
			continue
		}
		for _, e := range r.ev[j:] {
			if e.at < from {
				from, to = from-e.span, to-e.span
			}
		}
		return from, to, true
	}
	if !r.floored || ren < r.base || len(r.ev) > 0 && ren >= r.ev[0].ren {
		return from, to, false
	}
	low := r.floor
	for _, e := range r.ev {
		low = min(low, e.at)
	}
	if from > low {
		from, to = low, to-(from-low)
	}
	return from, to, true
}

// add records the renewal that ended count ren, removing [at, at+span) at
// now, on a bucket of length tau.
func (r *renewals) add(ren, at, span, now, tau int64) {
	if len(r.ev) == maxRenewals {
		old := r.ev[0]
		if !r.floored || now-r.floor >= tau {
			r.floored, r.base, r.floor = true, old.ren, old.at
		} else {
			r.floor = min(r.floor, old.at)
		}
		r.ev = slices.Delete(r.ev, 0, 1)
	}
	r.ev = append(r.ev, renewal{ren, at, span})
}

// admission returns the Admission of cost on key decided at instant at,
// leaving TAT end. Requires m.mu.
func (m *Model) admission(key string, cost, at, end int64) Admission {
	return Admission{Key: key, Cost: cost, At: at, End: end, Span: cost * m.t, Gen: m.gen[key], Epoch: m.epoch, Ren: m.ren[key]}
}

// AdmitN is AllowN that also returns the Admission of an admitted request
// of cost > 0 (the zero Admission otherwise), as hotlimit's AdmitN records
// it.
func (m *Model) AdmitN(key string, cost int64) (hotlimit.Decision, Admission) {
	d := m.AllowN(key, cost)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !d.Allowed || cost <= 0 {
		return d, Admission{}
	}
	return d, m.admission(key, cost, m.at, m.at+int64(d.ResetAfter))
}

// GiveBack gives back what the state still owes to a, as hotlimit's
// Admission.Refund does: nothing if the key's state was removed since a
// (whatever holds it now), else as GiveBackAt.
//
// After OnManualClock, a bucket give-back below later admissions gives
// back at the latest reading the model has read, as the limiter does at
// the latest reading its ManualClock has returned: a script that compares
// the two on a clock set back must read the clock through the model
// whenever the limiter reads it (each call on both), and not read it
// otherwise.
func (m *Model) GiveBack(a Admission) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if a.Cost > 0 && m.holds(a.Key) && m.gen[a.Key] == a.Gen {
		m.giveBackAt(a)
	}
}

// refundWindow gives back cost admitted at instant at on a window: it
// lowers the count of the window holding at, if the state still holds it,
// never below 0, and removes a key left fresh.
func (m *Model) refundWindow(key string, cost, at, now int64) {
	s := m.win[key]
	if s == nil {
		return
	}
	switch ka := at / m.w; {
	case s.k == ka:
		s.cur = max(0, s.cur-cost)
	case s.k == ka+1 && m.kind == "sliding":
		s.prev = max(0, s.prev-cost)
	}
	if fresh, judged := m.freshAt(key, now); fresh {
		m.remove(key, judged)
	}
}

// refundLog removes the newest cost instants at or before at that still
// count, and the key if none is left.
func (m *Model) refundLog(key string, cost, at int64) {
	s := m.log[key]
	if s == nil {
		return
	}
	now := max(m.now(), s.last)
	kept := s.at[:0]
	for _, t := range s.at {
		if t+m.w > now {
			kept = append(kept, t)
		}
	}
	s.at, s.last = kept, now
	for i := len(s.at) - 1; i >= 0 && cost > 0; i-- {
		if s.at[i] <= at {
			s.at = append(s.at[:i], s.at[i+1:]...)
			cost--
		}
	}
	if len(s.at) == 0 {
		m.remove(key, now)
	}
}

// holds reports whether the model holds state for key: whether the
// limiter holds an entry for it.
func (m *Model) holds(key string) bool {
	switch m.kind {
	case "tb", "leaky":
		_, ok := m.tat[key]
		return ok
	case "log":
		return m.log[key] != nil
	}
	return m.win[key] != nil
}

// freshAt reports whether key's state is fresh at now, and the instant it
// has been fresh from (see sweptAt), for a fresh state.
func (m *Model) freshAt(key string, now int64) (bool, int64) {
	switch m.kind {
	case "tb", "leaky":
		return m.tat[key] <= now, m.tat[key]
	case "log":
		s := m.log[key]
		now = max(now, s.last)
		n, _ := m.countLog(s, now)
		from := s.last
		for _, t := range s.at {
			from = max(from, t+m.w)
		}
		return n == 0, min(from, now)
	}
	k, e, prev, cur := m.counts(key, now)
	if prev != 0 || cur != 0 {
		return false, 0
	}
	s := m.win[key]
	from := s.k
	switch {
	case s.cur > 0 && m.kind == "sliding":
		from += 2
	case s.cur > 0 || s.prev > 0 && m.kind == "sliding":
		from++
	}
	return true, min(from*m.w, k*m.w+e)
}

// remove forgets key's state, removed as fresh from instant at.
func (m *Model) remove(key string, at int64) {
	delete(m.tat, key)
	delete(m.win, key)
	delete(m.log, key)
	delete(m.grp, key)
	m.gen[key]++
	m.sweptAt = max(m.sweptAt, at)
}

// AllowNAt is AllowN that also returns the instant the decision was made
// at: the reading, or later when the key's state is newer than it (a
// window's start, a log's latest write) or a new key is decided no earlier
// than the latest removal (see sweptAt).
func (m *Model) AllowNAt(key string, cost int64) (hotlimit.Decision, int64) {
	d := m.AllowN(key, cost)
	m.mu.Lock()
	defer m.mu.Unlock()
	return d, m.at
}

// Sweep removes every key whose state is fresh now, as Limiter.Sweep does,
// and returns how many it removed.
func (m *Model) Sweep() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var keys []string
	for k := range m.tat {
		keys = append(keys, k)
	}
	for k := range m.win {
		keys = append(keys, k)
	}
	for k := range m.log {
		keys = append(keys, k)
	}
	n := 0
	for _, k := range keys {
		if fresh, at := m.freshAt(k, now); fresh {
			m.remove(k, at)
			n++
		}
	}
	return n
}

// Holds reports whether the model holds state for key: whether the
// limiter holds an entry for it.
func (m *Model) Holds(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holds(key)
}

// Held returns the keys the model holds state for, sorted: the entries
// the limiter holds.
func (m *Model) Held() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for k := range m.tat {
		keys = append(keys, k)
	}
	for k := range m.win {
		keys = append(keys, k)
	}
	for k := range m.log {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Evict removes key as eviction under WithMaxKeys does, judged at now: a
// state fresh at now is removed as a sweep removes it (raising sweptAt to
// the instant it was fresh from), any other is forgotten as it stands.
func (m *Model) Evict(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.holds(key) {
		return
	}
	fresh, judged := m.freshAt(key, m.now())
	sweptAt := m.sweptAt
	m.remove(key, judged)
	if !fresh {
		m.sweptAt = sweptAt
	}
}

// Reset forgets key's state as Limiter.Reset does: the next request for it
// is decided as a new key's first, at its reading.
func (m *Model) Reset(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.holds(key) {
		sweptAt := m.sweptAt
		m.remove(key, 0)
		m.sweptAt = sweptAt
	}
}

// ReserveWithin is Reserve with Wait's deadline on a bucket: the request
// is refused, changing nothing, when the instant it may start is more than
// maxWait after now (for the token bucket, when it fits; for the leaky
// bucket, when its turn starts). Admitted, it also returns its Admission,
// what giving it back needs (see GiveBackAt).
func (m *Model) ReserveWithin(key string, cost, maxWait int64) (ok bool, a Admission) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cost <= 0 || cost > m.limit || (m.kind != "tb" && m.kind != "leaky") {
		return false, Admission{}
	}
	now := m.now()
	base := max(m.tatOf(key), now)
	n := base + cost*m.t
	wait := base - now
	if m.kind == "tb" {
		wait = max(0, n-m.limit*m.t-now)
	}
	if wait > maxWait {
		return false, Admission{}
	}
	m.tat[key] = n
	return true, m.admission(key, cost, now, n)
}

// GiveBackAt gives back admission a, as AllowLayers gives back an earlier
// layer's admission and a cancelled Wait its slot, on the entry that
// admission was made on (the caller checks that the key was not removed
// since): the buckets move TAT back by what the admission still owes now,
// min(Span, End − now), never below now (if give-backs below its units
// renewed the key since, with its time moved back as they moved it, or
// from their floor), and a give-back below later admissions renews the
// key (hotlimit's shard.go, "Renewals", states the rule); windows lower
// the count of the
// window holding At, if the state still holds it and the window length
// has not changed since; the log removes the newest instants at or before
// At. A key left fresh is removed.
func (m *Model) GiveBackAt(a Admission) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.giveBackAt(a)
}

func (m *Model) giveBackAt(a Admission) {
	key, cost, at, end := a.Key, a.Cost, a.At, a.End
	if cost <= 0 {
		return
	}
	switch m.kind {
	case "log":
		m.refundLog(key, cost, at)
		return
	case "tb", "leaky":
	default:
		if a.Epoch == m.epoch {
			m.refundWindow(key, cost, at, m.now())
		} else if m.win[key] != nil {
			if fresh, from := m.freshAt(key, m.now()); fresh {
				m.remove(key, from) // nothing given back, but a fresh entry goes, as in refundWindow
			}
		}
		return
	}
	tat, ok := m.tat[key]
	if !ok {
		return
	}
	// The time the admission added, [from, end), as the renewals since
	// moved it (hotlimit's shard.go, "Renewals").
	from := end - a.Span
	if a.Ren != m.ren[key] {
		r := m.grp[key]
		if r == nil {
			return
		}
		if from, end, ok = r.moved(a.Ren, from, end); !ok {
			return // renewed since, and no longer honoured
		}
	}
	// Below later admissions, it gives back at the latest reading read
	// (see high); on top of them, at the reading as it is.
	now := m.now()
	back := now
	if tat > end && m.manual {
		back = max(now, m.high)
	}
	next := tat
	if owed := end - max(from, back); owed > 0 {
		next = min(tat, max(tat-owed, back))
	}
	switch {
	case next <= now: // fresh
		m.remove(key, next)
		return
	case next != tat && tat > end:
		// Below later admissions, whose units move back: renew, recording
		// the time removed, the top of the admission's.
		r := m.grp[key]
		if r == nil {
			r = &renewals{}
			m.grp[key] = r
		}
		x := tat - next
		r.add(m.ren[key], end-x, x, back, m.limit*m.t)
		m.ren[key]++
	}
	m.tat[key] = next
}

// Reserve takes cost for key as Wait does on a bucket with no deadline: at
// once, pushing TAT past the burst if need be. It reports false, changing
// nothing, for a cost outside [1, Limit] or a window or log policy.
func (m *Model) Reserve(key string, cost int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cost <= 0 || cost > m.limit || (m.kind != "tb" && m.kind != "leaky") {
		return false
	}
	m.tat[key] = max(m.tatOf(key), m.now()) + cost*m.t
	return true
}

// String describes the model's whole state canonically (sorted keys), so
// that two models with equal strings decide alike.
func (m *Model) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s L%d T%d W%d swept@%d", m.kind, m.limit, m.t, m.w, m.sweptAt)
	if m.epoch != 0 {
		fmt.Fprintf(&b, " E%d", m.epoch) // window give-backs read it
	}
	if m.manual && m.high != 0 {
		fmt.Fprintf(&b, " high@%d", m.high) // bucket give-backs read it
	}
	for _, k := range slices.Sorted(maps.Keys(m.tat)) {
		fmt.Fprintf(&b, " %q:tat=%d", k, m.tat[k])
		if n := m.ren[k]; n != 0 {
			fmt.Fprintf(&b, ",ren=%d", n) // Admissions compare with it
		}
		if r := m.grp[k]; r != nil {
			fmt.Fprintf(&b, ",renewals=%v", *r)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(m.win)) {
		s := m.win[k]
		fmt.Fprintf(&b, " %q:k=%d,p=%d,q=%d", k, s.k, s.prev, s.cur)
	}
	for _, k := range slices.Sorted(maps.Keys(m.log)) {
		s := m.log[k]
		fmt.Fprintf(&b, " %q:log=%v,last=%d", k, s.at, s.last)
	}
	return b.String()
}

// countLog counts the instants that count at now: those less than one
// window before it.
func (m *Model) countLog(s *logState, now int64) (n, newest int64) {
	for _, t := range s.at {
		if t+m.w > now {
			n++
			newest = max(newest, t)
		}
	}
	return n, newest
}

func (m *Model) slidingLog(key string, now, cost int64, write bool) hotlimit.Decision {
	s := m.log[key]
	if s == nil {
		s = &logState{}
	}
	now = max(now, s.last)
	m.at = now
	n, newest := m.countLog(s, now)
	reset := int64(0)
	if n > 0 {
		reset = newest + m.w - now
	}
	if cost == 0 {
		return hotlimit.Decision{Allowed: true, Limit: m.limit, Remaining: max(0, m.limit-n), ResetAfter: time.Duration(reset)}
	}
	if n+cost <= m.limit {
		if write {
			for range cost {
				s.at = append(s.at, now)
			}
			s.last = now
			m.log[key] = s
		}
		return hotlimit.Decision{Allowed: true, Limit: m.limit, Remaining: m.limit - n - cost, ResetAfter: time.Duration(m.w)}
	}
	// The smallest wait after which cost fits, by binary search over
	// (0, W]: after W every instant held now has stopped counting.
	lo, hi := int64(0), m.w
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if k, _ := m.countLog(s, now+mid); k+cost <= m.limit {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hotlimit.Decision{Limit: m.limit, Remaining: max(0, m.limit-n), RetryAfter: time.Duration(hi), ResetAfter: time.Duration(reset)}
}

// SetPolicy changes the model's policy as hotlimit.Limiter.SetPolicy
// documents, keeping every key's state: bucket TATs are kept as they are;
// window counts, as read at now, move into the new window holding the
// instant they are read at; log instants that still count under the old
// window are kept, and only those. The policy must be valid
// and of the same algorithm; it reports false otherwise.
func (m *Model) SetPolicy(policy hotlimit.Policy) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := New(policy, m.clock)
	if n.kind != m.kind {
		return false
	}
	if m.kind == "fixed" || m.kind == "sliding" {
		if n.w != m.w {
			m.epoch++
		}
		now := m.now()
		for key := range m.win {
			k, e, prev, cur := m.counts(key, now)
			at := k*m.w + e
			if m.kind == "fixed" {
				prev = 0
			}
			m.win[key] = &winState{k: at / n.w, prev: prev, cur: cur}
		}
	}
	if m.kind == "log" {
		// Instants that no longer count under the old window are gone.
		now := m.now()
		for _, s := range m.log {
			at := max(now, s.last)
			kept := s.at[:0]
			for _, t := range s.at {
				if t+m.w > at {
					kept = append(kept, t)
				}
			}
			s.at, s.last = kept, at
		}
	}
	m.limit, m.t, m.w = n.limit, n.t, n.w
	return true
}
