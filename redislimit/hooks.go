package redislimit

import (
	"time"

	"github.com/hotlimit/hotlimit"
)

// Hooks are functions a Limiter calls as it works, so that an operator can
// see what a shared limiter does: how long each node takes to decide, what
// fails and how, what the failure policy answered, when a node's circuit
// opens and closes, and how many requests the two-tier cache answered.
// Install them with WithHooks; every field may be nil.
//
// Hooks are called synchronously, on the goroutine that made the call, so
// they must be quick and safe for concurrent use (an atomic add, a
// Prometheus counter or histogram). A layered call reports to the hooks of
// its first layer's limiter.
//
// Every error a call returns has been reported to Call, Failure or
// Misconfigured first: with a failure policy set, the Decision hides the
// outage from the caller, the hooks do not.
type Hooks struct {
	// Call follows every script call sent to a node: the node's address
	// ("" for a client that does not name nodes), the time from sending
	// to the reply, and the call's error (nil when Redis decided; a
	// MOVED or ASK redirection is reported as a call of its own). A
	// decision sent in a batch with others reports the batch's call, with
	// the error that decision got: its own script error, or its
	// context's when its caller stopped waiting for the batch. A
	// timeout (the call's deadline, WithTimeout or the caller's, passed
	// before Redis answered: it may or may not have consumed quota) is
	// an error that errors.Is context.DeadlineExceeded, or a net.Error
	// whose Timeout is true.
	Call func(node string, took time.Duration, err error)

	// Failure follows every decision that the failure policy made instead
	// of Redis: the limiter (the first layer's), the Decision returned
	// and the error returned with it (which wraps ErrUnavailable).
	Failure func(limiter string, d hotlimit.Decision, err error)

	// Misconfigured follows every call refused, with a denial, because
	// it cannot work as configured, before any round trip and whatever the
	// failure policy: its keys span Redis Cluster slots (ErrCrossSlot) or
	// its layers cannot be one call (ErrMixedLayers). limiter is the
	// first layer's.
	Misconfigured func(limiter string, d hotlimit.Decision, err error)

	// Breaker follows every change of a node's circuit (see Breaker):
	// from and to are "closed", "open" or "half-open".
	Breaker func(node, from, to string)

	// LocalDenial follows every request the two-tier cache denied
	// without a round trip (see WithLocalDenials): the limiter whose
	// cached denial answered.
	LocalDenial func(limiter string)
}

// WithHooks installs h (see Hooks). The hooks of a Breaker's state changes
// are those of the limiter whose call caused them.
func WithHooks(h Hooks) Option {
	return func(c *config) { c.hooks = &h }
}
