package httplimit

import (
	"context"
	"errors"
	"fmt"
)

// A ResetBackend is a Backend that can also return a key to its fresh
// state, for Middleware.Reset. It is optional: a Backend without it
// still limits; only Reset then fails with ErrResetUnsupported. Local
// and redislimit's backend implement it.
type ResetBackend interface {
	Backend
	// Reset returns key under the named limit to a fresh key's state
	// (full quota, nothing to wait for), as hotlimit.Limiter.Reset does.
	// A key the backend does not hold is already fresh: not an error.
	// It returns an error wrapping ErrUnknownLimit for a limit the
	// backend was not built with, or the store's error.
	Reset(ctx context.Context, limit, key string) error
}

// ErrResetUnsupported is returned by Middleware.Reset when its backend
// is not a ResetBackend, and by ResetVia.
var ErrResetUnsupported = errors.New("httplimit: the backend cannot reset keys")

// ResetVia resets key under limit through b when b is a ResetBackend, and
// returns ErrResetUnsupported otherwise: a Backend that wraps another
// implements ResetBackend with it.
func ResetVia(ctx context.Context, b Backend, limit, key string) error {
	if rb, ok := b.(ResetBackend); ok {
		return rb.Reset(ctx, limit, key)
	}
	return ErrResetUnsupported
}

// Reset implements ResetBackend with hotlimit.Limiter.Reset.
func (b *Local) Reset(_ context.Context, limit, key string) error {
	lim := b.classes.Class(limit)
	if lim == nil {
		return fmt.Errorf("%w %q", ErrUnknownLimit, limit)
	}
	lim.Reset(key)
	return nil
}

// Reset unblocks a client: it returns every layer the identity is
// limited by (its layer in each route group and, with Config.Global, its
// global layer) to a fresh state, so its next requests are decided as a
// new client's. It is an administrative act, for an operator (a support
// ticket, a false positive), not part of serving requests.
//
// identity is what Config.Key writes for the client: "tok:" and the
// token's hash (TokenIdentity computes it from the token), "ip:" and the
// address or prefix ("ip:192.0.2.1", "ip:2001:db8:1:2::/64"), or a
// ContextKey identity such as "tenant:acme". Resetting an identity the
// backend holds no state for does nothing. It returns ErrResetUnsupported
// when the backend is not a ResetBackend, else the first error of the
// backend, after trying every layer.
func (m *Middleware) Reset(ctx context.Context, identity string) error {
	rb, ok := m.backend.(ResetBackend)
	if !ok {
		return ErrResetUnsupported
	}
	var first error
	reset := func(limit, key string) {
		if err := rb.Reset(ctx, limit, key); err != nil && first == nil {
			first = err
		}
	}
	for i := range m.groups {
		if g := &m.groups[i]; !g.exempt {
			reset(g.policy.name, LayerKey(identity, g.name))
		}
	}
	if m.global != nil {
		reset(m.global.name, LayerKey(identity, ""))
	}
	return first
}
