package lease

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// Backend is an admission.Backend (the decisions of httplimit's
// middleware and grpclimit's interceptor) whose limits are lease
// Limiters: each request is decided in process from this instance's
// leases, against budgets shared by every instance through Redis, and
// the middleware's headers come from those Decisions (see
// Limiter.Decide for what they can know). It is an admission.StateBackend.
// Create one with NewBackend, or hand BackendFactory to the middleware.
type Backend struct {
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
// limit, on client with opts; unless opts give WithRedis a
// redislimit.WithBreaker, they share one new redislimit.Breaker. Each
// policy must be a hotlimit.TokenBucket or FixedWindow; the error names
// the limit that is not.
func NewBackend(client redis.Scripter, limits map[string]hotlimit.Policy, opts ...Option) (*Backend, error) {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	sort.Strings(names) // the first error is the same on every run
	shared := WithRedis(redislimit.WithBreaker(redislimit.NewBreaker(redislimit.DefaultFailures, redislimit.DefaultCooldown)))
	all := append([]Option{shared}, opts...)
	b := &Backend{limiters: make(map[string]*Limiter, len(limits))}
	for _, name := range names {
		l, err := New(client, name, limits[name], all...)
		if err != nil {
			b.Close(context.Background())
			return nil, fmt.Errorf("lease: limit %q: %w", name, err)
		}
		b.limiters[name] = l
	}
	return b, nil
}

// Limiter returns the limiter behind a named limit, or nil.
func (b *Backend) Limiter(name string) *Limiter { return b.limiters[name] }

// Allow implements admission.Backend (see AllowStates).
func (b *Backend) Allow(ctx context.Context, layers []admission.Layer) (hotlimit.Decision, error) {
	d, _, err := b.AllowStates(ctx, layers, nil)
	return d, err
}

// AllowBinding implements admission.BindingBackend (see AllowStates).
func (b *Backend) AllowBinding(ctx context.Context, layers []admission.Layer) (hotlimit.Decision, int, error) {
	return b.AllowStates(ctx, layers, nil)
}

// AllowStates implements admission.StateBackend. It admits a request only
// if every layer admits it, all or nothing: the layers are decided in
// order with Limiter.Decide, and when one refuses, the units the layers
// before it spent go back into this instance's leases (they stay debited
// in Redis, held here, as leased units always are). An admitted request
// reports the layer with the fewest requests of its cost left, as
// hotlimit.AllowLayers does; a refused one reports the layer that refused
// it, whose RetryAfter is Redis's for that layer (the layers after it are
// not decided). ResetAfter is the largest of the layers decided.
//
// states[i] is layer i's Remaining after the call (-1 for a layer not
// decided); its Window is hotlimit.Never, which a lease cannot tell. When
// Redis could not decide a layer, the error wraps ErrUnavailable and the
// Decision is that layer's failure policy's, as Decide returns it; a
// layer admitted by a failure policy gives nothing back.
func (b *Backend) AllowStates(ctx context.Context, layers []admission.Layer, states []admission.LayerState) (hotlimit.Decision, int, error) {
	for i := range states {
		states[i] = admission.LayerState{Remaining: -1, Window: hotlimit.Never}
	}
	if len(layers) == 0 {
		return hotlimit.Decision{RetryAfter: hotlimit.Never}, -1, nil
	}
	var buf [8]taken
	done := buf[:0]
	var out hotlimit.Decision
	binding, best := -1, int64(0)
	var failed error
	for i, ly := range layers {
		l := b.limiters[ly.Limit]
		if l == nil {
			b.giveBack(done, nil)
			return hotlimit.Decision{}, -1, fmt.Errorf("%w %q", admission.ErrUnknownLimit, ly.Limit)
		}
		d, g, err := l.decide(ctx, ly.Key, ly.Cost)
		if states != nil {
			states[i].Remaining = d.Remaining
		}
		if !d.Allowed {
			b.giveBack(done, states)
			d.ResetAfter = max(d.ResetAfter, out.ResetAfter)
			return d, i, err
		}
		if err != nil {
			g = nil // a failure policy admitted it: nothing was taken from a lease
		}
		done = append(done, taken{l: l, cost: ly.Cost, g: g})
		if n := requests(d.Remaining, ly.Cost); binding < 0 || n < best || n == best && d.Remaining < out.Remaining {
			best, binding = n, i
			out.Limit, out.Remaining = d.Limit, d.Remaining
		}
		out.Allowed = true
		out.ResetAfter = max(out.ResetAfter, d.ResetAfter)
		if err != nil {
			failed = err // a failure policy admitted layer i: the others still decide
		}
	}
	return out, binding, failed
}

// requests is how many more requests of cost fit in remaining units.
func requests(remaining, cost int64) int64 {
	if cost <= 0 {
		return math.MaxInt64
	}
	return remaining / cost
}

// taken is a layer's admission, to give back if a later layer refuses.
type taken struct {
	l    *Limiter
	cost int64
	g    *grant // the grant the units go back to; nil: nothing to give
}

// giveBack returns the admitted layers' units to their leases, and adds
// them to the layers' Remaining in states (when not nil).
func (b *Backend) giveBack(done []taken, states []admission.LayerState) {
	for j, t := range done {
		if t.g != nil {
			t.g.avail.Add(t.cost)
			if states != nil {
				states[j].Remaining += t.cost
			}
		}
	}
}

// Close closes every limiter (see Limiter.Close).
func (b *Backend) Close(ctx context.Context) error {
	var first error
	for _, l := range b.limiters {
		if err := l.Close(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}
