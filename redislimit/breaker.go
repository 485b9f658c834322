package redislimit

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Breaker is a circuit breaker in front of Redis, one circuit per node,
// so that a dead or unreachable server costs one fast failure per request
// instead of a timeout per request, and so that on a Redis Cluster one
// dead master fails only the keys it serves.
//
// Each circuit starts closed: calls to its node go through. After
// Failures consecutive failed calls (a timeout, a refused or broken
// connection) it opens: calls to that node fail at once with
// ErrCircuitOpen, without touching the network. Once Cooldown has passed
// since it opened it is half-open: exactly one call goes through as a
// probe while the others keep failing fast; the probe's success closes the
// circuit and its failure opens it for another Cooldown. A reply error
// from a live server (a script error, a wrong key type, a MOVED or ASK
// redirection) is not a failure of the connection and does not count, nor
// does a call whose caller's context had already ended before it was sent.
//
// A node is named by its address as the client knows it; a client that
// names none (a Ring, or any other Scripter) has one circuit.
//
// A Breaker is safe for concurrent use and must not be copied. Several
// limiters that use the same client should share one (WithBreaker); each
// Limiter otherwise has its own. Create one with NewBreaker.
type Breaker struct {
	threshold int32
	cooldown  time.Duration
	now       func() time.Duration // monotonic; replaced by tests

	mu    sync.Mutex                          // guards writes to nodes
	nodes atomic.Pointer[map[string]*circuit] // copy on write: read without a lock
}

// circuit is a Breaker's state for one node.
//
// Invariants: state is breakerClosed, breakerOpen or breakerHalfOpen;
// probing is true only in breakerHalfOpen; fails is 0 outside
// breakerClosed.
type circuit struct {
	b    *Breaker
	node string

	// state is read without the lock on the fast path: a closed circuit
	// with no failures costs one atomic load per call and one per result.
	state atomic.Int32 // breakerClosed, breakerOpen or breakerHalfOpen
	fails atomic.Int32 // consecutive failures while closed

	mu       sync.Mutex    // guards the transitions and the fields below
	openedAt time.Duration // when the circuit last opened
	probing  bool          // half-open: a probe is in flight
}

// BreakerState is the state of one node's circuit.
type BreakerState int32

const (
	breakerClosed int32 = iota
	breakerOpen
	breakerHalfOpen
)

// The states a node's circuit moves between (see Breaker).
const (
	BreakerClosed   = BreakerState(breakerClosed)
	BreakerOpen     = BreakerState(breakerOpen)
	BreakerHalfOpen = BreakerState(breakerHalfOpen)
)

// String returns "closed", "open" or "half-open".
func (s BreakerState) String() string {
	switch s {
	case BreakerClosed:
		return "closed"
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "BreakerState(" + strconv.Itoa(int(s)) + ")"
}

// Default breaker settings, used by New when no WithBreaker is given.
const (
	DefaultFailures = 5
	DefaultCooldown = time.Second
)

var monoStart = time.Now()

func monoNow() time.Duration { return time.Since(monoStart) }

// NewBreaker returns a Breaker whose circuits open after failures
// consecutive failures and probe again after cooldown. Values below 1
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

// circuit returns node's circuit, creating it closed.
func (b *Breaker) circuit(node string) *circuit {
	if m := b.nodes.Load(); m != nil {
		if c := (*m)[node]; c != nil {
			return c
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.nodes.Load()
	if old != nil {
		if c := (*old)[node]; c != nil {
			return c
		}
	}
	m := make(map[string]*circuit, 1+lenMap(old))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	c := &circuit{b: b, node: node}
	m[node] = c
	b.nodes.Store(&m)
	return c
}

func lenMap(m *map[string]*circuit) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Open reports whether the breaker is refusing calls to some node right
// now (its circuit open and still cooling down, or half-open with its
// probe in flight).
func (b *Breaker) Open() bool {
	if m := b.nodes.Load(); m != nil {
		for _, c := range *m {
			if c.open() {
				return true
			}
		}
	}
	return false
}

// State returns the state of node's circuit ("" names the only node of a
// client that names none; a node never called is closed).
func (b *Breaker) State(node string) BreakerState {
	if m := b.nodes.Load(); m != nil {
		if c := (*m)[node]; c != nil {
			return BreakerState(c.state.Load())
		}
	}
	return BreakerClosed
}

// retryIn returns how long until node's circuit lets a probe through, 0
// when it lets calls through now.
func (b *Breaker) retryIn(node string) time.Duration {
	if m := b.nodes.Load(); m != nil {
		if c := (*m)[node]; c != nil {
			return c.retryIn()
		}
	}
	return 0
}

func (c *circuit) open() bool {
	if c.state.Load() == breakerClosed {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch c.state.Load() {
	case breakerOpen:
		return c.b.now()-c.openedAt < c.b.cooldown
	case breakerHalfOpen:
		return c.probing
	}
	return false
}

// retryIn returns how long until the circuit lets a probe through, 0 when
// it lets calls through now.
func (c *circuit) retryIn() time.Duration {
	if c.state.Load() == breakerClosed {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state.Load() == breakerOpen {
		return max(0, c.b.cooldown-(c.b.now()-c.openedAt))
	}
	return 0
}

// notify reports a change of node's circuit from one state to another to
// h. It is called after the circuit's lock is released, so a hook may use
// the limiter.
func notify(h *Hooks, node string, from, to int32) {
	if from != to && h != nil && h.Breaker != nil {
		h.Breaker(node, BreakerState(from), BreakerState(to))
	}
}

// acquire reports whether a call may go to the node now (ok), and whether
// that call is the half-open state's probe. An ok result must be followed
// by exactly one done, or one release given probe.
func (c *circuit) acquire(h *Hooks) (ok, probe bool) {
	if c.state.Load() == breakerClosed {
		return true, false
	}
	c.mu.Lock()
	switch c.state.Load() {
	case breakerClosed:
		c.mu.Unlock()
		return true, false
	case breakerOpen:
		if c.b.now()-c.openedAt < c.b.cooldown {
			c.mu.Unlock()
			return false, false
		}
		c.state.Store(breakerHalfOpen)
		c.probing = true
		c.mu.Unlock()
		notify(h, c.node, breakerOpen, breakerHalfOpen)
		return true, true
	default: // half-open
		ok = !c.probing
		c.probing = true
		c.mu.Unlock()
		return ok, ok
	}
}

// release returns an acquired call that was not made, or whose outcome
// says nothing about the node; probe is what acquire said. Only the
// probe's release lets another caller probe: a call acquired before the
// circuit opened, abandoned now, must not free the slot of the probe in
// flight.
func (c *circuit) release(probe bool) {
	if !probe {
		return
	}
	c.mu.Lock()
	if c.state.Load() == breakerHalfOpen {
		c.probing = false
	}
	c.mu.Unlock()
}

// done records the outcome of an acquired call.
func (c *circuit) done(ok bool, h *Hooks) {
	if ok {
		if c.state.Load() == breakerClosed && c.fails.Load() == 0 {
			return // the common case: nothing to write
		}
		c.mu.Lock()
		from := c.state.Load()
		c.fails.Store(0)
		c.state.Store(breakerClosed)
		c.probing = false
		c.mu.Unlock()
		notify(h, c.node, from, breakerClosed)
		return
	}
	c.mu.Lock()
	from := c.state.Load()
	switch from {
	case breakerClosed:
		if c.fails.Add(1) >= c.b.threshold {
			c.tripLocked()
		}
	case breakerHalfOpen:
		c.tripLocked()
	case breakerOpen:
		// A call acquired before the circuit opened failed late: it is
		// already open.
	}
	to := c.state.Load()
	c.mu.Unlock()
	notify(h, c.node, from, to)
}

// tripLocked opens the circuit. Requires c.mu.
func (c *circuit) tripLocked() {
	c.state.Store(breakerOpen)
	c.openedAt = c.b.now()
	c.probing = false
	c.fails.Store(0)
}
