package hotlimit

type kind uint8

const (
	kindTokenBucket kind = iota + 1
	kindLeakyBucket
	kindFixedWindow
	kindSlidingWindow
	kindSlidingLog
	kindConcurrency
)

// isBucket reports whether k is the token or the leaky bucket, whose state
// word is a theoretical arrival time (params.g). The buckets come first in
// kind's order, so this is one comparison on the decision path.
func (k kind) isBucket() bool { return k <= kindLeakyBucket }

// isWindow reports whether k is the fixed or the sliding window, whose
// state word packs window counts (params.win).
func (k kind) isWindow() bool { return k == kindFixedWindow || k == kindSlidingWindow }

func (k kind) String() string {
	return [...]string{"", "TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog", "Concurrency"}[k]
}

// params is a policy as the engine uses it. It is immutable once made;
// SetPolicy publishes a new one.
type params struct {
	policy Policy // as given to New or SetPolicy, pointers dereferenced
	kind   kind
	limit  int64
	g      gcra       // kindTokenBucket, kindLeakyBucket
	win    window     // kindFixedWindow, kindSlidingWindow
	logW   int64      // kindSlidingLog: the window, ns
	info   PolicyInfo // describe(), set by newParams
	// epoch counts the changes of window length (or of count width) that
	// SetPolicy has made: a window count is an admission's own only in
	// the layout it was counted in (refund.go). 0 at New.
	epoch uint64
}

// step decides cost c at now against state word w. See bucket.go and
// window.go.
func (p *params) step(w uint64, now, c int64) (uint64, verdict) {
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		return p.g.step(w, now, c)
	case kindConcurrency: // peeks only: see concurrency.go
		return w, verdict{ok: true, rem: max(0, p.limit-int64(w))}
	}
	return p.win.step(w, now, c)
}

// freshFrom returns the instant from which w, a state that a reading now
// judges fresh, has been a fresh key's state: a bucket's TAT, the end of
// the last window a window word's counts are in (its own window's start
// when it has none). A reading at or after it decides w as a new entry;
// an older one (a clock set back) may find it owing. Removing w as fresh
// must raise sweptAt to it (shard.go, protocol step 5). It is never later
// than judgedAt(w, now); for a concurrency limit, whose words hold no
// time, it is 0.
func (p *params) freshFrom(w uint64, now int64) int64 {
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		return min(tat(w), now)
	case kindFixedWindow, kindSlidingWindow:
		return p.win.freshFrom(w, now)
	}
	return 0
}

// vacant returns the state word a key the limiter holds no entry for is
// decided on at reading now, and the instant it is decided at: what the
// entries removed as fresh may still owe at a reading older than the
// instant they were fresh from (sweptAt, shard.go protocol steps 1 and 5),
// so that a removal changes no decision, and a peek (Check) and the
// insertion agree. For the buckets that is TAT = sweptAt, decided at now;
// for the windows an empty word in sweptAt's window, decided at the start
// of that window if the reading is older (as any stale reading is). Only
// removals of fresh entries raise sweptAt: a Reset, or the eviction of an
// entry that still owed, forgets what it removed.
func (l *Limiter) vacant(p *params, now int64) (w uint64, at int64) {
	s := l.sweptAt.Load()
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		if s > now {
			return packTAT(s), now
		}
	case kindFixedWindow, kindSlidingWindow:
		w = p.win.freshWord(max(now, s))
		return w, p.win.judgedAt(w, now)
	}
	return 0, now
}

// resetAfter returns how long until w is a fresh key's state at now.
//
// For a concurrency limiter, which has no notion of time, it is the number
// of operations in flight: 0 exactly when the entry is fresh.
func (p *params) resetAfter(w uint64, now int64) int64 {
	switch p.kind {
	case kindTokenBucket, kindLeakyBucket:
		return p.g.resetAfter(w, now)
	case kindConcurrency:
		return int64(w)
	}
	return p.win.resetAfter(w, now)
}
