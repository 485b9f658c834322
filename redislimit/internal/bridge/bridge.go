// Package bridge lets redislimit/lease make its Redis calls through a
// redislimit.Limiter, so that a lease limiter has the Limiter's routing
// (Redis Cluster included), breaker, timeout, hooks and failure policy,
// without redislimit exporting them. redislimit sets the functions when
// it is initialized; a *redislimit.Limiter is passed as l.
package bridge

import (
	"context"

	"github.com/hotlimit/hotlimit"
)

var (
	// NewScript returns a script for Call: src after the common start of
	// every script and the incarnation functions
	// (redislimit/internal/luasrc's Start and Incarnation).
	NewScript func(src string) any

	// Call runs script on the Redis key of key under l (KEYS[1]) and
	// key's incarnation key (KEYS[2]; see luasrc's incarnation.lua), with
	// args, through l's router, circuit, timeout and Call hook. Its
	// error wraps redislimit.ErrUnavailable; it is not reported to the
	// Failure hook (see Fail).
	Call func(ctx context.Context, l any, script any, key string, args ...any) ([]int64, error)

	// Fail returns the Decision of l's failure policy for a request of
	// cost on key that Redis could not decide because of err, and
	// reports both to l's Failure hook.
	Fail func(l any, key string, cost int64, err error) hotlimit.Decision
)

// A Leaser decides a Limiter's requests from leases (redislimit/lease's
// mode, see lease.Mode): the Limiter asks it instead of Redis.
type Leaser interface {
	// Decide decides a request of cost on key. With undo, an admission
	// from a lease also returns the function that gives its units back
	// to that lease (nil when nothing can be given back).
	Decide(ctx context.Context, key string, cost int64, undo bool) (hotlimit.Decision, func(), error)
	// Sweep gives back idle keys' leases (see lease.Limiter.Sweep).
	Sweep(ctx context.Context) error
	// Close gives back what the leases hold (see lease.Limiter.Close).
	Close(ctx context.Context) error
}

// ModeOption returns a redislimit.Option (as any) that makes a Limiter
// decide through the Leaser build returns; build is called by
// redislimit.New with the new *redislimit.Limiter and its policy.
var ModeOption func(build func(l any, policy hotlimit.Policy) (Leaser, error)) any
