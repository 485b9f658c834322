package hotlimit

import (
	"math/bits"
	"time"
)

// window holds the parameters of the fixed window and the sliding-window
// counter.
//
// State word, fixed window (cb = countBits):
//
//	bit  63       0 (deadBit, reserved by the table: see shard.go)
//	bits 62..cb   low bits of the window index k = ⌊now/W⌋
//	bits cb-1..0  count admitted in window k
//
// State word, sliding-window counter:
//
//	bit  63         0 (deadBit)
//	bits 62..2cb    low bits of the window index k
//	bits 2cb-1..cb  p: count admitted in window k−1
//	bits cb-1..0    q: count admitted in window k
//
// cb is the bit length of Limit, so every count fits. The index keeps
// eb = 63−cb (fixed) or 63−2cb (sliding) bits.
//
// Exact mode: when eb bits hold every window index the clock can reach
// (⌊maxTime/W⌋), the word stores the full index. A state from a later
// window than the reading (a stale clock reading) is read at the start of
// its own window: no time has passed. This covers every fixed window of
// 1 ms or more with Limit ≤ 1,000,000, and sliding windows of an hour or
// more with Limit ≤ 1,000,000 (of a second or more with Limit ≤ 2,000).
//
// Ring mode, otherwise: the word holds the index modulo 2^eb, and the full
// index is recovered relative to the reading as the nearest index at or
// before it, unless it lies at most half the ring (2^(eb−1) windows)
// after it, in which case the reading is stale and is treated as above.
// Two cases can then be misread. A key untouched for half the ring or more
// may have its state read as newer than it is, and be decided at the start
// of that later window: its counts only ever deny, so this can deny, never
// admit more; and the sweeper removes a key as soon as its counts are
// expired, long before. And a reading more than half the
// ring older than a key's state would read the state as expired: with the
// default clock a reading is never that stale (it would take a goroutine
// preempted for weeks), so this is reachable only by setting a ManualClock
// back that far, which is outside the contract in ring mode.
// Typical horizons (half the ring) in ring mode:
//
//	fixed,   Limit 2^40,      1 ns windows:     2^21 ns (2 ms)
//	fixed,   Limit 1,000,000, 1 µs windows:     2^42 µs (139 years)
//	sliding, Limit 1,000,000, 1 min windows:    2^22 min (8 years)
//	sliding, Limit 1,000,000, 1 s windows:      2^22 s (48 days)
//	sliding, Limit 2,097,151, 1 s windows:      2^20 s (12 days)
//
// New rejects configurations that leave fewer than 20 index bits, and
// ring-mode configurations whose horizon is under minHorizon (24 h).
//
// Every word records its window, whatever its counts: a word whose counts
// are 0 is fresh at its window and at any later instant, but a reading
// older than its window is stale and is decided at the start of that
// window, as for any other word. (Reading a zero-count word as fresh at any
// instant would let a stale reading write an older window into it, one
// whose budget was already spent: overspend.)
//
// Who writes a word, and why none moves a window backwards:
//   - insert (shard.go, protocol steps 1 and 2) writes the inserter's
//     decision on freshWord(max(now, sweptAt)), at the inserter's reading
//     or, when that is older, at the start of that word's window: a
//     removed entry's counted windows ended at or before sweptAt, and an
//     empty one's window started there (step 5).
//   - decide (stepAt, by CAS: step 3) writes only an admission, in the
//     window view returns, which is never older than the stored one: a
//     stale reading is moved forward to the stored window first.
//   - a give-back (by CAS: step 9) lowers counts and keeps the stored
//     index.
//   - SetPolicy's conversion (convertWindow, under the shard's mutex, into
//     a new table) writes the counts into the new layout's window holding
//     the instant the old word is decided at, which is at or after the
//     conversion's reading and the stored window's start. Later writes
//     move forward from there by the rules above.
//   - rebuild copies a word as it is (step 8); retire sets only deadBit
//     (step 4).
//
// Invariants:
//   - 0 ≤ now ≤ maxTime, 1 ≤ W ≤ maxWindow, 1 ≤ Limit < 2^cb.
//   - A count never exceeds Limit; a denial and a peek never change the word.
//   - The index stored is never older than the one it replaces (above).
type window struct {
	length  int64  // window length W, ns
	limit   int64  // Limit
	cb      uint   // bits per count
	eb      uint   // bits of window index kept
	ib      uint   // index shift: cb (fixed) or 2cb (sliding)
	exact   bool   // eb bits hold every index up to maxTime/W: no ring
	cmask   uint64 // (1<<cb)−1
	emask   uint64 // (1<<eb)−1
	sliding bool
	per     divisor // divides by W
}

// minIndexBits is the fewest window-index bits New accepts.
const minIndexBits = 20

// minHorizon is the shortest ring-mode horizon (half the ring, in time)
// New accepts: a clock reading is never that stale with the default clock,
// so the ring's ambiguity is reachable only by moving a ManualClock.
const minHorizon = 24 * time.Hour

// horizon returns how far apart a reading and a state may be and still be
// read right: unbounded (maxTime) in exact mode, half the ring otherwise.
func (x *window) horizon() time.Duration {
	if x.exact || x.eb-1 >= 63-uint(bits.Len64(uint64(x.length))) {
		return maxTime
	}
	return time.Duration(int64(1)<<(x.eb-1)) * time.Duration(x.length)
}

func newWindow(limit int64, w time.Duration, sliding bool) (window, bool) {
	return newWindowBits(limit, w, sliding, uint(bits.Len64(uint64(limit))))
}

// newWindowBits is newWindow with cb bits per count, cb ≥ bits(limit).
func newWindowBits(limit int64, w time.Duration, sliding bool, cb uint) (window, bool) {
	used := cb
	if sliding {
		used = 2 * cb
	}
	if used > 63-minIndexBits {
		return window{}, false
	}
	eb := 63 - used
	return window{
		length: int64(w), limit: limit, cb: cb, eb: eb, ib: used,
		exact: uint(bits.Len64(uint64(maxTime/int64(w)))) <= eb,
		cmask: 1<<cb - 1, emask: 1<<eb - 1, sliding: sliding,
		per: newDivisor(uint64(w)),
	}, true
}

// Accessors for the packed word.
func (x *window) index(w uint64) uint64 { return w >> x.ib & x.emask }
func (x *window) q(w uint64) int64      { return int64(w & x.cmask) }
func (x *window) p(w uint64) int64      { return int64(w >> x.cb & x.cmask) }
func (x *window) pack(k uint64, p, q int64) uint64 {
	return (k&x.emask)<<x.ib | uint64(p)<<x.cb | uint64(q)
}

// freshWord returns a fresh key's word at now: no counts, in now's window.
// Word 0 is fresh only in exact mode at any reading; in ring mode index 0
// may lie after a reading's index on the ring.
func (x *window) freshWord(now int64) uint64 {
	k, _ := x.per.div(uint64(now))
	return x.pack(k, 0, 0)
}

// view reads state w at now. It returns the window index k the decision is
// made in, the elapsed time e into it, and the counts p (window k−1) and q
// (window k) as they stand then.
func (x *window) view(w uint64, now int64) (k uint64, e, p, q int64) {
	k, r := x.per.div(uint64(now))
	e = int64(r)
	sq := x.q(w)
	var sp int64
	if x.sliding {
		sp = x.p(w)
	}
	var diff uint64 // windows from the stored index to now's
	if si := x.index(w); x.exact {
		if si > k {
			return si, 0, sp, sq // a stale reading: decide at the start of the state's window
		}
		diff = k - si
	} else {
		diff = (k - si) & x.emask
	}
	switch {
	case diff == 0:
		return k, e, sp, sq
	case !x.exact && diff >= 1<<(x.eb-1):
		// The state is from a later window than now: a stale reading.
		// Decide at the start of the state's window instead.
		k += (x.emask + 1) - diff
		return k, 0, sp, sq
	case diff == 1 && x.sliding:
		return k, e, sq, 0
	default:
		return k, e, 0, 0
	}
}

// used returns ⌈p·(W−e)/W⌉: the previous window's weight, in whole units.
func (x *window) used(p, e int64) int64 {
	if p == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(p), uint64(x.length-e))
	var quo, rem uint64
	if hi == 0 {
		quo, rem = x.per.div(lo) // the common case: no 128-bit divide
	} else {
		quo, rem = bits.Div64(hi, lo, uint64(x.length)) // hi < W since p < 2^63 and W−e ≤ W
	}
	if rem != 0 {
		quo++
	}
	return int64(quo)
}

// resetAfterView returns the time until the counts p, q at elapsed e are
// both expired.
func (x *window) resetAfterView(e, p, q int64) int64 {
	switch {
	case q > 0 && x.sliding:
		return x.length - e + x.length // q becomes the previous count, then expires
	case q > 0 || p > 0:
		return x.length - e
	}
	return 0
}

// step decides a request of cost 0 ≤ c ≤ Limit at now against state w.
func (x *window) step(w uint64, now, c int64) (uint64, verdict) {
	next, v, _ := x.stepAt(w, now, c)
	return next, v
}

// stepAt is step that also returns the instant the decision was made at:
// now, or the start of w's window when the reading is stale (see view).
// Refund needs it to find the window an admission was recorded in.
func (x *window) stepAt(w uint64, now, c int64) (uint64, verdict, int64) {
	k, e, p, q := x.view(w, now)
	next, v := x.stepCounts(w, k, e, p, q, c)
	return next, v, int64(k)*x.length + e
}

// stepCounts decides cost c in window k at elapsed e with counts p, q.
func (x *window) stepCounts(w, k uint64, e, p, q, c int64) (uint64, verdict) {
	u := x.used(p, e)
	if c == 0 {
		return w, verdict{ok: true, rem: max(0, x.limit-q-u), reset: x.resetAfterView(e, p, q)}
	}
	if q+c+u <= x.limit {
		q += c
		return x.pack(k, p, q), verdict{ok: true, rem: x.limit - q - u, reset: x.resetAfterView(e, p, q)}
	}
	return w, verdict{rem: max(0, x.limit-q-u), retry: x.retryAfter(e, p, q, c), reset: x.resetAfterView(e, p, q)}
}

// retryAfter returns the shortest wait after which a request of cost c,
// denied at elapsed e with counts p and q, is admitted.
func (x *window) retryAfter(e, p, q, c int64) int64 {
	W := x.length
	if !x.sliding {
		return W - e // a fixed window starts empty
	}
	// Later in this window: p's weight decays. Admitted at e' iff
	// p·(W−e') ≤ room·W, i.e. e' ≥ W − ⌊room·W/p⌋.
	if room := x.limit - q - c; room >= 0 && p > 0 {
		if at := W - floorMulDiv(room, W, p); at < W {
			return at - e
		}
	}
	// In the next window q becomes the previous count and decays.
	room := x.limit - c
	at := int64(0)
	if q > 0 {
		at = max(0, W-floorMulDiv(room, W, q))
	}
	return W - e + at // at == W: the window after next, when both are gone
}

// floorMulDiv returns ⌊a·b/d⌋ for a, b ≥ 0 and d > 0, saturating at
// MaxInt64.
func floorMulDiv(a, b, d int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(d) {
		return 1<<63 - 1
	}
	quo, _ := bits.Div64(hi, lo, uint64(d))
	if quo > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(quo)
}

// refund gives back cost c admitted at instant at (as returned by stepAt)
// from w: it lowers the count of the window holding at, if w still holds
// that window's count, and never below 0.
func (x *window) refund(w uint64, c, at int64) uint64 {
	ka, _ := x.per.div(uint64(at))
	var d uint64 // windows from ka to w's index
	if si := x.index(w); x.exact {
		if si < ka {
			return w
		}
		d = si - ka
	} else {
		d = (si - ka) & x.emask
		if d >= 1<<(x.eb-1) {
			return w // w is older than the admission: nothing of it is left
		}
	}
	k := ka + d
	p, q := x.p(w), x.q(w)
	if !x.sliding {
		p = 0
	}
	switch {
	case d == 0:
		q = max(0, q-c)
	case d == 1 && x.sliding:
		p = max(0, p-c)
	default:
		return w // the admission's window has expired from the state
	}
	return x.pack(k, p, q)
}

// resetAfter returns how long until w is a fresh key's state; 0 means fresh.
func (x *window) resetAfter(w uint64, now int64) int64 {
	_, e, p, q := x.view(w, now)
	return x.resetAfterView(e, p, q)
}

// storedIndex returns the full window index of w, read relative to now
// as view reads it (in ring mode, a stored index more than half the ring
// behind now's is a later window's).
func (x *window) storedIndex(w uint64, now int64) uint64 {
	si := x.index(w)
	if x.exact {
		return si
	}
	k, _ := x.per.div(uint64(now))
	if diff := (k - si) & x.emask; diff < 1<<(x.eb-1) {
		return k - diff
	}
	return k + (si-k)&x.emask
}

// freshFrom returns the instant from which w, fresh at now, has been a
// fresh key's state: the end of the last window its counts are in (for
// the sliding window, the window after the one q was counted in, where q
// still weighs), or its window's start when it has none. Never later than
// judgedAt(w, now).
func (x *window) freshFrom(w uint64, now int64) int64 {
	k := x.storedIndex(w, now)
	switch {
	case x.q(w) > 0 && x.sliding:
		k += 2
	case x.q(w) > 0 || x.sliding && x.p(w) > 0:
		k++
	}
	j := x.judgedAt(w, now)
	if k > uint64(j)/uint64(x.length) {
		return j // not fresh at now: cannot happen for a word removed as fresh
	}
	return int64(k) * x.length
}

// judgedAt returns the instant a reading now judges w at: now, or the start
// of w's window when the reading is older than it.
func (x *window) judgedAt(w uint64, now int64) int64 {
	k, e, _, _ := x.view(w, now)
	return int64(k)*x.length + e
}
