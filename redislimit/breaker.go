package redislimit

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Breaker is a circuit breaker in front of Redis, one circuit per node,
// so that a dead or unreachable server costs one fast failure per request
// instead of a timeout per request, and so that on a Redis Cluster one
// dead master fails only the keys it serves. Each circuit is a
// github.com/sony/gobreaker/v2 two-step breaker.
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
// does a call whose caller's context had already ended before it was sent,
// such as a decision queued for a batch whose deadline passed while it
// waited (a probe abandoned so lets the next caller probe). The outcome of a call
// let through before the circuit last changed state counts for nothing.
//
// A node is named by its address as the client knows it; a client that
// names none (a Ring, or any other Scripter) has one circuit.
//
// A Breaker is safe for concurrent use and must not be copied. Several
// limiters that use the same client should share one (WithBreaker); each
// Limiter otherwise has its own. Create one with NewBreaker.
type Breaker struct {
	threshold uint32
	cooldown  time.Duration

	mu    sync.Mutex                          // guards writes to nodes
	nodes atomic.Pointer[map[string]*circuit] // copy on write: read without a lock
}

// circuit is a Breaker's gobreaker circuit for one node, and the state
// changes it reported that the hooks have not seen yet.
type circuit struct {
	b    *Breaker
	node string
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]

	pending atomic.Bool // changes is not empty
	mu      sync.Mutex  // guards the fields below; taken inside gobreaker's lock, never around a gobreaker call
	opened  time.Time   // when the circuit last opened
	changes []change    // reported by gobreaker, for the hooks
}

// change is one state change of a circuit: gobreaker's states' names,
// "closed", "open" and "half-open".
type change struct{ from, to string }

// The breaker New gives a limiter when no WithBreaker is given:
// NewBreaker(defaultFailures, defaultCooldown).
const (
	defaultFailures = 5
	defaultCooldown = time.Second
)

var monoStart = time.Now()

func monoNow() time.Duration { return time.Since(monoStart) }

// NewBreaker returns a Breaker whose circuits open after failures
// consecutive failures and probe again after cooldown. Values below 1
// (failures) or 0 (cooldown) are raised to them. A limiter given no
// WithBreaker has NewBreaker(5, time.Second) of its own.
func NewBreaker(failures int, cooldown time.Duration) *Breaker {
	failures = min(max(failures, 1), 1<<30)
	return &Breaker{threshold: uint32(failures), cooldown: max(0, cooldown)}
}

// errNotCounted is the outcome given to gobreaker for a call that says
// nothing about its node (see circuit.release).
var errNotCounted = errors.New("redislimit: call not counted")

// errFailed is the outcome given to gobreaker for a failed call.
var errFailed = errors.New("redislimit: call failed")

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
	timeout := b.cooldown
	if timeout <= 0 {
		timeout = time.Nanosecond // gobreaker reads 0 as its default, 60s
	}
	c.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        node,
		MaxRequests: 1, // one probe while half-open
		Timeout:     timeout,
		ReadyToTrip: func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= b.threshold },
		IsExcluded:  func(err error) bool { return err == errNotCounted },
		// Called under gobreaker's lock: the change is queued, and the
		// hooks see it once the call that caused it has left gobreaker
		// (see flush), so that a hook may use the breaker.
		OnStateChange: func(_ string, from, to gobreaker.State) {
			c.mu.Lock()
			if to == gobreaker.StateOpen {
				c.opened = time.Now()
			}
			c.changes = append(c.changes, change{from.String(), to.String()})
			c.pending.Store(true)
			c.mu.Unlock()
		},
	})
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

// state returns the state of node's circuit, as the Breaker hook names
// it ("" names the only node of a client that names none; a node never
// called is closed). An open circuit whose cool-down has passed reads
// half-open.
func (b *Breaker) state(node string) string {
	if m := b.nodes.Load(); m != nil {
		if c := (*m)[node]; c != nil {
			return c.cb.State().String()
		}
	}
	return gobreaker.StateClosed.String()
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

// retryIn returns how long until the circuit lets a probe through, 0 when
// it lets calls through now.
func (c *circuit) retryIn() time.Duration {
	if c.cb.State() != gobreaker.StateOpen {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(0, c.b.cooldown-time.Since(c.opened))
}

// flush reports the circuit's queued state changes to h, outside any lock.
func (c *circuit) flush(h *Hooks) {
	if !c.pending.Load() {
		return
	}
	c.mu.Lock()
	changes := c.changes
	c.changes = nil
	c.pending.Store(false)
	c.mu.Unlock()
	if h != nil && h.Breaker != nil {
		for _, ch := range changes {
			h.Breaker(c.node, ch.from, ch.to)
		}
	}
}

// ticket is an acquired call's outcome report (gobreaker's done).
type ticket func(error)

// acquire reports whether a call may go to the node now, and the ticket
// its outcome goes to: an ok result must be followed by exactly one done
// or release of that ticket.
func (c *circuit) acquire(h *Hooks) (bool, ticket) {
	done, err := c.cb.Allow()
	c.flush(h)
	if err != nil {
		return false, nil
	}
	return true, done
}

// release returns an acquired call that was not made, or whose outcome
// says nothing about the node: it counts neither way, and a probe so
// released lets the next caller probe.
func (c *circuit) release(t ticket, h *Hooks) {
	t(errNotCounted)
	c.flush(h)
}

// done records the outcome of an acquired call.
func (c *circuit) done(t ticket, ok bool, h *Hooks) {
	if ok {
		t(nil)
	} else {
		t(errFailed)
	}
	c.flush(h)
}
