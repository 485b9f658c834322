package redislimit

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/redis/go-redis/v9"
)

// RedisBackend is an admission.Backend (what makes the decisions of
// httplimit's middleware and grpclimit's interceptor) whose limits live in
// Redis: one Limiter per named limit, all on one client and one shared
// Breaker, and each request's layers decided in one script call, which
// also reports each layer's state (the RateLimit field then has one item
// per limit). Build one with NewBackend, or hand BackendFactory to the
// middleware or interceptor.
type RedisBackend struct {
	limiters map[string]*Limiter
	decides  bool // a failure policy was given: answer it instead of an error
}

// BackendFactory returns an admission.BackendFactory (httplimit's and
// grpclimit's Config.Backend) that builds a RedisBackend on client. Each named limit becomes a Limiter of that name with opts;
// unless opts include WithBreaker, the limiters share one new Breaker.
//
// When Redis cannot decide, the backend returns the error, and the
// middleware applies its own failure policy, unless opts include
// WithFailOpen or WithFallbackLocal: then the backend answers with that
// policy's Decision and no error. On a Redis Cluster, give WithHashTag so
// that the layers of one request share a slot. With WithLeases, every
// limit decides from leases (see WithLeases): call SweepLeases
// periodically.
func BackendFactory(client redis.Scripter, opts ...Option) admission.BackendFactory {
	return func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		return NewBackend(client, limits, opts...)
	}
}

// NewBackend builds the RedisBackend that BackendFactory's factory returns. On
// error it closes what it had built.
func NewBackend(client redis.Scripter, limits map[string]hotlimit.Policy, opts ...Option) (*RedisBackend, error) {
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	all := opts
	if cfg.breaker == nil {
		all = append([]Option{WithBreaker(NewBreaker(defaultFailures, defaultCooldown))}, opts...)
	}
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is the same on every run
	b := &RedisBackend{limiters: make(map[string]*Limiter, len(limits)), decides: cfg.failSet}
	for _, name := range names {
		l, err := New(client, name, limits[name], all...)
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("redislimit: limit %q: %w", name, err)
		}
		b.limiters[name] = l
	}
	return b, nil
}

// AllowStates implements admission.Backend in the same script call
// as the decision: each layer's Remaining is its own, as
// hotlimit.AllowLayersState reports it (after its admission; when the
// call is denied, the denying layer's as it decided, every other layer's
// as it was), and its Window the wait for one unit more on that same
// state, for every policy. The states are unknown (Remaining -1) when a
// cached denial (WithLocalDenials) or a failure policy answered. A nil
// states reads none, and the script computes none.
//
// A states of another length than layers (the interface asks for
// len(layers)) never panics: the call is decided with states for every
// layer, states receives those of its first layers, and any element
// beyond the layers is unknown (Remaining -1), as admission.Local does.
func (b *RedisBackend) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	var buf [8]Layer
	ls := buf[:0]
	for _, ly := range layers {
		l := b.limiters[ly.Limit]
		if l == nil {
			return hotlimit.Decision{}, -1, fmt.Errorf("%w %q", admission.ErrUnknownLimit, ly.Limit)
		}
		ls = append(ls, Layer{Limiter: l, Key: ly.Key, Cost: ly.Cost})
	}
	d, i, err := AllowLayersState(ctx, states, ls...)
	// A failure policy answers outages, not configuration errors
	// (ErrCrossSlot, ErrMixedLayers): those go to the middleware.
	if err != nil && (!b.decides || !errors.Is(err, ErrUnavailable)) {
		return hotlimit.Decision{}, -1, err
	}
	return d, i, nil
}

// Reset implements admission.Backend with Limiter.Reset: it deletes
// key's state under the named limit in Redis, for every instance, and
// this instance's cached denial of key (WithLocalDenials). It also drops
// this instance's cached denials of layered calls, in every limit: such
// a denial may have waited on key's layer, and would otherwise keep
// denying for key's old wait (other instances' cached denials stay until
// their RetryAfter, as for Limiter.Reset). One round trip; an error
// wraps admission.ErrUnknownLimit, hotlimit.ErrKeyTooLong or
// ErrUnavailable.
func (b *RedisBackend) Reset(ctx context.Context, limit, key string) error {
	l := b.limiters[limit]
	if l == nil {
		return fmt.Errorf("%w %q", admission.ErrUnknownLimit, limit)
	}
	err := l.Reset(ctx, key)
	for _, other := range b.limiters {
		if other.cache != nil {
			other.cache.dropLayered()
		}
	}
	return err
}

// SweepLeases calls Limiter.SweepLeases on every limiter (lease mode:
// idle keys' leases go back to Redis), and returns the first error.
func (b *RedisBackend) SweepLeases(ctx context.Context) error {
	var first error
	for _, l := range b.limiters {
		if err := l.SweepLeases(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Close closes every limiter (their WithFallbackLocal limiters, and in lease
// mode gives back what the leases hold).
func (b *RedisBackend) Close() error {
	for _, l := range b.limiters {
		l.Close()
	}
	return nil
}

var _ admission.Backend = (*RedisBackend)(nil)
