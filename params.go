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

// freshWord returns the state word of a key inserted at now.
func (p *params) freshWord(now int64) uint64 {
	if p.kind == kindFixedWindow || p.kind == kindSlidingWindow {
		return p.win.freshWord(now)
	}
	return 0
}

// judgedAt returns the instant at which a reading now judges w: now, or a
// window word's own window start when the reading is older (see window.go).
// Removing w as fresh must raise sweptAt to it.
func (p *params) judgedAt(w uint64, now int64) int64 {
	if p.kind == kindFixedWindow || p.kind == kindSlidingWindow {
		return p.win.judgedAt(w, now)
	}
	return now
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
