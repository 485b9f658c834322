package lease

import (
	"context"
	"fmt"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/bridge"
	"github.com/redis/go-redis/v9"
)

// Backend is an admission.Backend (the decisions of httplimit's
// middleware and grpclimit's interceptor) whose limits decide from
// leases: a redislimit.RedisBackend in lease mode (see Mode), built from
// this package's options, which also gives each limit's lease Limiter.
// Each request is decided in process from this instance's leases,
// against budgets shared by every instance through Redis, and the
// middleware's headers come from those Decisions (see Limiter.Decide for
// what they can know). Create one with NewBackend, or hand
// BackendFactory to the middleware.
type Backend struct {
	rb       *redislimit.RedisBackend
	limiters map[string]*Limiter
}

// BackendFactory returns an admission.BackendFactory (httplimit's and
// grpclimit's Config.Backend) that builds a Backend on client with opts.
func BackendFactory(client redis.Scripter, opts ...Option) admission.BackendFactory {
	return func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		return NewBackend(client, limits, opts...)
	}
}

// NewBackend builds one Limiter per named limit, each named after its
// limit, on client with opts, as redislimit.NewBackend builds its
// limiters in lease mode (they share one new redislimit.Breaker unless
// WithRedis gives one). Each policy must be a hotlimit.TokenBucket or
// FixedWindow; the error names the limit that is not.
func NewBackend(client redis.Scripter, limits map[string]hotlimit.Policy, opts ...Option) (*Backend, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	b := &Backend{limiters: make(map[string]*Limiter, len(limits))}
	mode := bridge.ModeOption(func(l any, policy hotlimit.Policy) (bridge.Leaser, error) {
		sl := l.(*redislimit.Limiter)
		ll, err := newOn(sl, policy, cfg)
		if err != nil {
			return nil, err
		}
		b.limiters[sl.Name()] = ll
		return modeLeaser{ll}, nil
	}).(redislimit.Option)
	ropts := []redislimit.Option{redislimit.WithPrefix(cfg.prefix), redislimit.WithTimeout(cfg.timeout)}
	if cfg.failOpen {
		ropts = append(ropts, redislimit.WithFailurePolicy(redislimit.FailOpen))
	}
	ropts = append(append(ropts, cfg.redis...), mode)
	if b.rb, err = redislimit.NewBackend(client, limits, ropts...); err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	return b, nil
}

// Limiter returns the lease Limiter behind a named limit, or nil.
func (b *Backend) Limiter(name string) *Limiter { return b.limiters[name] }

// Allow is AllowStates without the states nor the binding layer.
func (b *Backend) Allow(ctx context.Context, layers []admission.Layer) (hotlimit.Decision, error) {
	return b.rb.Allow(ctx, layers)
}

// AllowBinding is AllowStates without the states.
func (b *Backend) AllowBinding(ctx context.Context, layers []admission.Layer) (hotlimit.Decision, int, error) {
	return b.rb.AllowBinding(ctx, layers)
}

// AllowStates implements admission.Backend as
// redislimit.AllowLayers decides layers in lease mode: in order, each
// from its lease, all or nothing (the units of the layers admitted before
// a refusal go back into their leases, where they stay debited in Redis,
// held here). An admitted request reports the layer with the fewest
// requests of its cost left, as hotlimit.AllowLayers does; a refused one
// the layer that refused it (the layers after it are not decided).
// states[i] is layer i's Remaining after the call (-1 for a layer not
// decided); its Window is hotlimit.Never, which a lease cannot tell.
// When Redis could not decide, the error goes to the middleware, unless
// WithFailOpen or a redislimit.WithFailurePolicy (WithRedis) was given:
// the backend then answers with that policy's Decision and no error.
func (b *Backend) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	return b.rb.AllowStates(ctx, layers, states)
}

// Reset implements admission.Backend with redislimit's
// RedisBackend.Reset: the key's state in Redis is deleted for every
// instance (a new incarnation, which the leases taken from the old one
// cannot spend; see the package doc).
func (b *Backend) Reset(ctx context.Context, limit, key string) error {
	return b.rb.Reset(ctx, limit, key)
}

// Close gives back what every limit's leases hold (see Limiter.Close),
// each within its limiter's timeout. It is what httplimit's
// Middleware.Close and grpclimit's Interceptor.Close call.
func (b *Backend) Close() error { return b.rb.Close() }

var _ admission.Backend = (*Backend)(nil)
