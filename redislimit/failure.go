package redislimit

import (
	"errors"
	"time"

	"github.com/hotlimit/hotlimit"
)

// failurePolicy is what a Limiter answers when Redis cannot decide: the
// call timed out, the connection failed, the breaker is open, or the
// server replied with an error. The zero value fails closed: it denies,
// with RetryAfter the time until the breaker lets a probe through (or
// its cool-down). WithFailOpen and WithFallbackLocal choose the others.
// Whatever the policy, the call also returns the error, so that it can be
// logged and counted; the Decision returned with it is the policy's.
type failurePolicy struct {
	mode failMode
	opts []hotlimit.Option // failFallbackLocal
}

type failMode uint8

const (
	failClosed failMode = iota
	failOpen
	failFallbackLocal
)

// WithFailOpen makes the limiter admit every request Redis could not
// decide, with Remaining and ResetAfter 0, instead of denying it (the
// default, fail closed: RetryAfter is then the time until the breaker
// lets a probe through, or its cool-down). Use it where the limit
// protects capacity that an outage of the limiter should not take down.
// The call still returns the error.
func WithFailOpen() Option {
	return func(c *config) { c.fail, c.failSet = failurePolicy{mode: failOpen}, true }
}

// WithFallbackLocal makes the limiter decide the requests Redis could not
// decide with an in-process hotlimit.Limiter that New builds from the
// limiter's own policy and opts (for example hotlimit.WithMaxKeys), and
// that Close closes: the limit then holds per process instead of across
// processes, which keeps a security-sensitive limit (logins, password
// resets) closed enough without refusing everyone. In a layered call,
// the in-process limiters decide the layers of limiters with this
// option. The call still returns the error.
func WithFallbackLocal(opts ...hotlimit.Option) Option {
	return func(c *config) { c.fail, c.failSet = failurePolicy{mode: failFallbackLocal, opts: opts}, true }
}

// Errors wrapped by the error a Limiter returns when Redis did not decide.
var (
	// ErrCircuitOpen: the breaker is open, so the call was not made.
	ErrCircuitOpen = errors.New("redislimit: circuit breaker open: Redis recently failed")
	// ErrUnavailable wraps every failure to decide through Redis,
	// together with its cause (a timeout, a network error, a reply error,
	// or ErrCircuitOpen).
	ErrUnavailable = errors.New("redislimit: Redis could not decide")
)

// ErrClosed is returned, with a denial, for a request a limiter in lease
// mode (WithLeases) refuses because it was closed.
var ErrClosed = errors.New("redislimit: limiter closed")

// failDecision applies the layers' failure policies: any layer that
// fails closed denies; otherwise the WithFallbackLocal layers decide
// locally (all or nothing, with hotlimit.AllowLayers) and WithFailOpen
// layers are skipped.
//
// A fail-closed denial's RetryAfter is the time until node's circuit lets a
// probe through, or its cool-down (at least 1ms) when it is not open.
func failDecision(layers []Layer, node string) (hotlimit.Decision, int) {
	var buf [8]hotlimit.Layer
	var ibuf [8]int
	fb, at := buf[:0], ibuf[:0] // at[k]: the index in layers of fb[k]
	for i, ly := range layers {
		l := ly.Limiter
		switch l.fail.mode {
		case failClosed:
			retry := l.breaker.retryIn(node)
			if retry == 0 {
				retry = max(l.breaker.cooldown, time.Millisecond)
			}
			return hotlimit.Decision{Limit: l.spec.limit, RetryAfter: retry}, i
		case failFallbackLocal:
			fb = append(fb, hotlimit.Layer{Limiter: l.local, Key: ly.Key, Cost: ly.Cost})
			at = append(at, i)
		}
	}
	if len(fb) > 0 {
		d, k := hotlimit.AllowLayersState(nil, fb...) // k ≥ 0: fb is not empty
		return d, at[k]
	}
	return hotlimit.Decision{Allowed: true, Limit: layers[0].Limiter.spec.limit}, 0
}
