package redislimit

import (
	"sync"
	"sync/atomic"
	"time"
)

// Breaker is a circuit breaker in front of Redis, so that a dead or
// unreachable server costs one fast failure per request instead of a
// timeout per request.
//
// It starts closed: calls go through. After Failures consecutive failed
// calls (a timeout, a refused or broken connection) it opens: calls fail at
// once with ErrCircuitOpen, without touching the network. Once Cooldown has
// passed since it opened it is half-open: exactly one call goes through as
// a probe while the others keep failing fast; the probe's success closes
// the breaker and its failure opens it for another Cooldown. A reply error
// from a live server (a script error, a wrong key type) is not a failure of
// the connection and does not count.
//
// A Breaker is safe for concurrent use and must not be copied. Several
// limiters that use the same client should share one (WithBreaker); each
// Limiter otherwise has its own. Create one with NewBreaker.
type Breaker struct {
	threshold int32
	cooldown  time.Duration
	now       func() time.Duration // monotonic; replaced by tests

	// state is read without the lock on the fast path: a closed breaker
	// with no failures costs one atomic load per call and one per result.
	state atomic.Int32 // breakerClosed, breakerOpen or breakerHalfOpen
	fails atomic.Int32 // consecutive failures while closed

	mu       sync.Mutex    // guards the transitions and the fields below
	openedAt time.Duration // when the breaker last opened
	probing  bool          // half-open: a probe is in flight
}

const (
	breakerClosed int32 = iota
	breakerOpen
	breakerHalfOpen
)

// Default breaker settings, used by New when no WithBreaker is given.
const (
	DefaultFailures = 5
	DefaultCooldown = time.Second
)

var monoStart = time.Now()

func monoNow() time.Duration { return time.Since(monoStart) }

// NewBreaker returns a closed Breaker that opens after failures
// consecutive failures and probes again after cooldown. Values below 1
// (failures) or 0 (cooldown) are raised to them.
func NewBreaker(failures int, cooldown time.Duration) *Breaker {
	if failures < 1 {
		failures = 1
	}
	if failures > 1<<30 {
		failures = 1 << 30
	}
	return &Breaker{threshold: int32(failures), cooldown: max(0, cooldown), now: monoNow}
}

// Open reports whether the breaker is refusing calls right now (open and
// still cooling down, or half-open with its probe in flight).
func (b *Breaker) Open() bool {
	if b.state.Load() == breakerClosed {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerOpen:
		return b.now()-b.openedAt < b.cooldown
	case breakerHalfOpen:
		return b.probing
	}
	return false
}

// retryIn returns how long until the breaker lets a probe through, 0 when
// it lets calls through now.
func (b *Breaker) retryIn() time.Duration {
	if b.state.Load() == breakerClosed {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Load() == breakerOpen {
		return max(0, b.cooldown-(b.now()-b.openedAt))
	}
	return 0
}

// acquire reports whether a call may go to Redis now (ok), and whether
// that call is the half-open state's probe. An ok result must be followed
// by exactly one done, or one release given probe.
func (b *Breaker) acquire() (ok, probe bool) {
	if b.state.Load() == breakerClosed {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerClosed:
		return true, false
	case breakerOpen:
		if b.now()-b.openedAt < b.cooldown {
			return false, false
		}
		b.state.Store(breakerHalfOpen)
		b.probing = true
		return true, true
	default: // half-open
		if b.probing {
			return false, false
		}
		b.probing = true
		return true, true
	}
}

// release returns an acquired call that was not made; probe is what
// acquire said. Only the probe's release lets another caller probe: a call
// acquired before the breaker opened, abandoned now, must not free the
// slot of the probe in flight.
func (b *Breaker) release(probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	if b.state.Load() == breakerHalfOpen {
		b.probing = false
	}
	b.mu.Unlock()
}

// done records the outcome of an acquired call.
func (b *Breaker) done(ok bool) {
	if ok {
		if b.state.Load() == breakerClosed && b.fails.Load() == 0 {
			return // the common case: nothing to write
		}
		b.mu.Lock()
		b.fails.Store(0)
		b.state.Store(breakerClosed)
		b.probing = false
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerClosed:
		if b.fails.Add(1) >= b.threshold {
			b.trip()
		}
	case breakerHalfOpen:
		b.trip()
	case breakerOpen:
		// A call acquired before the breaker opened failed late: the
		// breaker is already open.
	}
}

// trip opens the breaker. Requires b.mu.
func (b *Breaker) trip() {
	b.state.Store(breakerOpen)
	b.openedAt = b.now()
	b.probing = false
	b.fails.Store(0)
}
