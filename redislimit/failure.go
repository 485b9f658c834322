package redislimit

import (
	"errors"
	"time"

	"github.com/hotlimit/hotlimit"
)

// FailurePolicy says what a Limiter answers when Redis cannot decide: the
// call timed out, the connection failed, the breaker is open, or the
// server replied with an error. The zero value is FailClosed.
//
// Whatever the policy, the call also returns the error, so that it can be
// logged and counted; the Decision returned with it is the policy's.
type FailurePolicy struct {
	mode  failMode
	local *hotlimit.Limiter // failFallback
	opts  []hotlimit.Option // failFallbackLocal
}

type failMode uint8

const (
	failClosed failMode = iota
	failOpen
	failFallback
	failFallbackLocal
)

// FailClosed and FailOpen are variables, not constants as httplimit's
// FailMode values are: a FailurePolicy may carry a limiter (FallbackTo), so
// it is a struct, which Go cannot make a constant.
var (
	// FailClosed denies every request Redis could not decide, with
	// RetryAfter the time until the breaker lets a probe through (or its
	// cool-down). Use it where admitting too much is worse than refusing
	// service: it is the default.
	FailClosed = FailurePolicy{mode: failClosed}

	// FailOpen admits every request Redis could not decide, with
	// Remaining and ResetAfter 0. Use it where the limit protects
	// capacity that an outage of the limiter should not take down.
	FailOpen = FailurePolicy{mode: failOpen}
)

// FallbackTo decides the requests Redis could not decide with local, an
// in-process limiter that should have the same policy: the limit then
// holds per process instead of across processes, which keeps a
// security-sensitive limit (logins, password resets) closed enough
// without refusing everyone. In a layered call, local decides the layers
// of limiters with this policy.
func FallbackTo(local *hotlimit.Limiter) FailurePolicy {
	return FailurePolicy{mode: failFallback, local: local}
}

// Fallback is FallbackTo.
//
// Deprecated: beside FallbackLocal the name did not say which limiter
// decides; use FallbackTo (a limiter of yours) or FallbackLocal (one New
// builds).
func Fallback(local *hotlimit.Limiter) FailurePolicy { return FallbackTo(local) }

// FallbackLocal is FallbackTo with an in-process limiter that New builds
// from the limiter's own policy and opts (for example
// hotlimit.WithMaxKeys), and that Close closes. NewBackend needs this form:
// each of its limits gets its own local limiter.
func FallbackLocal(opts ...hotlimit.Option) FailurePolicy {
	return FailurePolicy{mode: failFallbackLocal, opts: opts}
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

// failDecision applies the layers' failure policies: any FailClosed layer
// denies; otherwise the Fallback layers decide locally (all or nothing,
// with hotlimit.AllowLayers) and FailOpen layers are skipped.
//
// A FailClosed denial's RetryAfter is the time until node's circuit lets a
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
		case failFallback, failFallbackLocal:
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
