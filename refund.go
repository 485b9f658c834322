package hotlimit

import "sync/atomic"

// Give-backs.
//
// A give-back undoes one admission: a layer of AllowLayers admitted before
// a later layer refused, a slot Wait reserved and abandons, or an
// Admission given back with Refund. It refers to that admission, never to
// the key alone: to the entry the admission was made on, as an
// incarnation (shard.go, protocol step 9), and to what it consumed (its instant and
// cost, and for the buckets the TAT it left). It gives back only what the
// state still owes to that admission, so the key is never left able to
// admit more than it could had the admission never happened:
//
//   - nothing once the entry is gone (swept, evicted, reset, possibly
//     re-created since): what it held went with it;
//   - token and leaky bucket: the part of the admission's cost·T that has
//     not drained by the give-back's instant, min(cost·T, end − now), where
//     end is the TAT it left and T the interval of the policy it was
//     decided under (SetPolicy keeps TATs as time: admission.from); TAT
//     moves back by that much but never below now. The instant is read
//     after the word, so it is no older than any decision the word
//     reflects, on a clock that never goes back; on a ManualClock set back
//     it is the clock's reading for a give-back on top of the key's
//     admissions and the latest reading the clock has returned for one
//     below later admissions (see giveBackNow). Proof: if the admission's units have not
//     all drained (end > now), no later admission found the bucket full,
//     so TAT = end + (later costs)·T, and TAT − owed ≥ now + (later costs)·T,
//     which is at least what every later admission alone would have left.
//     A give-back below later admissions moves their units back, which
//     their records do not know: it renews the entry, and a record of an
//     earlier incarnation is then moved back as the renewals since moved
//     its units, or no further back than their floor (shard.go,
//     "Renewals", has the rule and its proof);
//   - fixed window: cost from the count of the window the admission was
//     counted in, while the state is still in that window; sliding window:
//     also from the previous-window count, once the window has turned;
//     nothing once SetPolicy has changed the window length (epoch);
//   - sliding log: up to cost of the newest instants no later than the
//     admission's that still count.
//
// Each admission is given back at most once: AllowLayers and Wait give
// back their own, and an Admission is spent by its first Refund.

// admission is what a give-back needs to know of the admission it undoes.
//
// Three words, so that AllowLayers' per-layer record stays small: five
// cost AllowLayers=3 about 18% in CPU time (the bench module's RESULTS.md,
// "The admission record stays three words").
type admission struct {
	inc uint64 // the entry's incarnation: shard.incarnation, logRing.inc
	// from and to, by policy:
	//   - token and leaky bucket: the interval [from, to) of TAT it added.
	//     to is the TAT it left and from = to − cost·T, T the interval of
	//     the policy it was decided under: SetPolicy keeps TATs as time, so
	//     this still measures the admission after a change of rate, where
	//     cost·T at the new rate would not.
	//   - windows: from is the instant it was decided at, and to the epoch
	//     (params.epoch) of the window layout it was counted in: a count is
	//     the admission's own only in that layout.
	//   - sliding log: from is the instant it was decided at.
	from, to int64
}

// admitted returns the admission of cost decided at instant at under p on
// the entry of incarnation inc, leaving TAT end (buckets).
func (p *params) admitted(inc uint64, at, end, cost int64) admission {
	if p.kind.isBucket() {
		return admission{inc, end - cost*p.g.t, end}
	}
	return admission{inc, at, int64(p.epoch)}
}

// Admission records what one admitted request consumed, so that Refund can
// give it back when the work it admitted did not happen (the request failed
// validation, a later check refused it). Fill one with AdmitN; the zero
// Admission holds nothing.
//
// An Admission gives back at most once, and never more than the limiter's
// state still owes to that admission, so no sequence of calls lets a key
// admit more than its policy allows (docs/semantics.md, "Give-backs"). It
// must not be copied after AdmitN fills it (go vet reports copies): each
// copy would claim the same units again.
type Admission struct {
	held atomic.Bool // the admission is there to give back; the first Refund takes it
	l    *Limiter
	key  string
	cost int64
	a    admission
}

// AdmitN is AllowN that also records an admitted request of cost > 0 in *a,
// for a.Refund. Any other decision leaves *a holding nothing. What *a held
// before is dropped, not given back. *a keeps key itself, not a copy, so
// key must not be a view of bytes the caller changes later (as a string
// made with package unsafe can be). Like AllowN, it allocates nothing for
// a key the limiter holds. AdmitN must not run concurrently with another
// method on the same *a.
func (l *Limiter) AdmitN(a *Admission, key string, cost int64) (d Decision) {
	var adm admission
	v, _, p := l.allow(key, cost, &adm, l.now())
	d.setFrom(v, p.limit, p.delay(v, cost))
	held := v.ok && cost > 0
	if held {
		a.l, a.key, a.cost, a.a = l, key, cost, adm
	}
	a.held.Store(held) // one store: nothing else runs on *a meanwhile
	return d
}

// Refund gives back what a's admission still holds in its limiter's state,
// as if the request had not been admitted, and reports whether this call
// spent a (only the first Refund of a filled Admission does; the others,
// and a Refund of the zero Admission, do nothing). What it gives back, for
// a cost c admitted at instant t on key k:
//
//   - nothing if k's entry was removed since t (by Reset, by eviction under
//     WithMaxKeys, or by Sweep, which removes only entries that owe
//     nothing), even if k has an entry again;
//   - TokenBucket, LeakyBucket: the part of c that has not refilled since
//     t: k's TAT moves back by min(c·T, E − now), where E is the TAT the
//     admission left (t + its ResetAfter) and T the interval at t (which
//     SetPolicy may have changed since), but never below now (possibly
//     less after a give-back below it: see below). now is the clock's
//     reading; on a ManualClock set back, for an admission below later
//     ones, the latest reading the clock has returned (a unit that
//     refilled before a later decision is not given back);
//   - FixedWindow: c off the count of t's window, if k's state is still in
//     it and SetPolicy has not changed the Window since t; SlidingWindow:
//     likewise, or off the previous window's count once
//     the window has turned;
//   - SlidingLog: up to c of k's newest admitted instants that are no later
//     than t and still count.
//
// A key whose state this leaves fresh at the clock's reading is removed,
// as the sweeper would; so a Refund on a ManualClock set back leaves the
// key where its other admissions put it, and Check reports what it then
// admits.
// Stats.Refunded counts a Refund that found its admission's entry. Refund
// is safe for concurrent use, also on the same *Admission.
//
// On the buckets, Refunds may come in any order. A give-back (a Refund, a
// layer AllowLayers undoes, a cancelled Wait's slot) that lands below
// later admissions of the key moves their units back in time, and the
// key's entry keeps track of the latest 16 such give-backs: a later Refund
// of one of those admissions gives back exactly what its units still
// hold, at any instant, unless it has seen more than 16 of them. An
// admission that old is taken as starting no later than the lowest point
// any give-back since removed time from: still exact at the instant of
// those give-backs, and once time has passed possibly less, never more
// (the rest drains as it would have).
// docs/semantics.md, "Give-backs", states the rule.
func (a *Admission) Refund() bool {
	if !a.held.CompareAndSwap(true, false) {
		return false
	}
	a.l.giveBack(a.key, a.cost, a.a)
	return true
}

// giveBack gives back cost of admission a on key: what the state still
// owes to it (see above).
func (l *Limiter) giveBack(key string, cost int64, a admission) {
	if cost <= 0 {
		return
	}
	if l.isSlidingLog() {
		l.refundLog(key, cost, a)
		return
	}
	h := l.hash(key)
	s := l.shardOf(h)
	t := s.tab.Load()
	if sl := t.find(h, key); sl != nil {
		if s.holds(sl, a.inc) {
			if done, live := l.refundAt(t.p, &sl.word, cost, a); live && done {
				l.tally.countRefund()
				return
			}
		} else if !l.kind.isBucket() {
			return // another entry than the admission's
		}
		// Retired meanwhile, the refund leaves the state fresh (the entry
		// then goes in the same CAS), it lands below later admissions (the
		// entry is then renewed), or, on a bucket, the entry was renewed
		// since the admission: under the mutex (shard.go, protocol steps
		// 4, 5 and 9).
	}
	s.mu.Lock()
	if l.refundLocked(s, h, key, cost, a) {
		l.tally.countRefund()
	}
	s.mu.Unlock()
}

// refundLocked gives back cost of admission a on key, whose shard s it
// holds the mutex of, and reports whether it found the admission's entry
// (or, on a bucket, one that still honours it: see shard.honoured). It
// removes the entry if that leaves its state fresh (a request refused by a
// later layer then leaves no state behind), in one CAS: no decision can
// come between the refund and the removal. A bucket's refund that lands
// below later admissions renews the entry in that CAS (shard.renew).
func (l *Limiter) refundLocked(s *shard, h uint64, key string, cost int64, a admission) bool {
	for {
		t := s.tab.Load()
		sl := t.find(h, key) // live: nothing retires it while we hold s.mu
		if sl == nil {
			return false
		}
		p := t.p
		old := sl.word.Load()
		rec, ok := a, s.holds(sl, a.inc)
		if p.kind.isBucket() {
			rec, ok = s.honoured(sl, a)
		}
		if !ok {
			return false
		}
		at, now := l.giveBackNow(p, old, rec)
		next := p.refundWord(old, cost, rec, at)
		if giveBackReadHook != nil {
			giveBackReadHook()
		}
		switch {
		case p.resetAfter(next, now) == 0:
			if t.retireAs(sl, old, next) {
				l.raiseSweptAt(p.freshFrom(next, now)) // before the mutex goes: shard.go, protocol step 5
				l.keys.Add(-1)
				s.swept.Add(1)
				return true
			}
		case next == old:
			return true
		case !p.belowLater(old, rec):
			if sl.word.CompareAndSwap(old, next) {
				return true
			}
		case !t.fits(key):
			l.publish(s, t.grown(key)) // room for the renewed slot; sl moved
		default:
			if t.retire(sl, old) {
				s.renew(t, h, key, old, next, s.incarnation(sl), rec, at, p.g.tau)
				return true
			}
		}
		// A decision changed the word first, or the table was rebuilt:
		// again from the key's live slot.
	}
}

// giveBackNow reads the clock for a give-back of record a into word w
// under p, after loading w: at is the instant it gives back at, now the
// reading that judges whether the state it leaves is fresh. Every decision w reflects read the clock
// before its CAS, so on a clock that never goes back this reading is no
// older than any of them, which the buckets' bound needs when the
// give-back lands below later admissions (see above): a reading older
// than a later admission that found the bucket full would count the
// admission's units, which had refilled before it, as still owed. A
// ManualClock may have been set back since; a bucket give-back below
// later admissions then reads the latest reading the clock has returned,
// which is no older than any of them either (ManualClock.latest). Any
// other give-back reads the clock as it is, so that it leaves the key
// exactly where its other admissions put it, judged at the reading every
// later call is decided at:
//
//   - a bucket give-back on top (no units above a's end): no later
//     decision holds units, so none can have found the bucket full past
//     a's units; a later decision that found it full and was given back
//     since left the TAT at its own start, at or above a's end, so a is
//     then below later admissions. Giving back at the plain reading moves
//     TAT to max(a's start, now), as if a had not been admitted; judged
//     at the latest reading it would move TAT no lower than that reading
//     and, finding the key fresh there, remove an entry that still owes
//     time at the clock's reading.
//   - below later admissions, at the latest reading: what it gives back
//     leaves the TAT past that reading (TAT − owed ≥ max(start, at) +
//     the later costs·T), so it is never judged fresh there; but a key
//     it gives nothing to (every unit refilled by then) is judged at now,
//     the reading every later call is decided at, where it may still owe.
//   - the windows give back by the admission's window and the state's,
//     never by the reading, which only judges whether the state is left
//     fresh (a stale one judges at the state's window: window.go).
func (l *Limiter) giveBackNow(p *params, w uint64, a admission) (at, now int64) {
	now = l.now()
	if c, ok := l.clock.(*ManualClock); ok && p.belowLater(w, a) {
		return max(now, min(c.latest(), maxTime)), now
	}
	return now, now
}

// giveBackReadHook, when set (by tests only), runs in refundAt and
// refundLocked (with the shard's mutex held) between the clock read and
// the CAS: where a decision on a later reading can change the word.
var giveBackReadHook func()

// refundAt runs refund's CAS loop without a lock, for an admission made
// on the entry whose word w is. live is false if the word is retired; done
// is false, with nothing written, if the refund would leave the state
// fresh (the caller then refunds under the mutex, removing the entry in
// the same CAS) or, on a bucket, land below later admissions (the caller
// then renews the entry under the mutex).
func (l *Limiter) refundAt(p *params, w *atomic.Uint64, cost int64, a admission) (done, live bool) {
	for {
		old := w.Load()
		if old&deadBit != 0 {
			return false, false
		}
		at, now := l.giveBackNow(p, old, a)
		next := p.refundWord(old, cost, a, at)
		if p.resetAfter(next, now) == 0 || next != old && p.belowLater(old, a) {
			return false, true
		}
		if giveBackReadHook != nil {
			giveBackReadHook()
		}
		if next == old || w.CompareAndSwap(old, next) {
			return true, true
		}
	}
}

// belowLater reports whether w, a bucket's state, holds time past the end
// of admission a: units booked after a's, which a give-back of a moves
// back in time. Always false for the other policies.
func (p *params) belowLater(w uint64, a admission) bool {
	return p.kind.isBucket() && tat(w) > a.to
}

// refundWord is w after giving back cost of admission a at now.
func (p *params) refundWord(w uint64, cost int64, a admission, now int64) uint64 {
	if p.kind.isBucket() {
		return p.g.refund(w, now, a.from, a.to)
	}
	if a.to != int64(p.epoch) {
		// Counted in a window of another length: SetPolicy merged that
		// window's counts into the window of the new length holding its
		// instant, together with counts of other windows, so no count of
		// the state is the admission's any more.
		return w
	}
	return p.win.refund(w, cost, a.from)
}
