package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/hotlimit/hotlimit"
)

// A Backend makes a Pipeline's decisions. Local keeps the limits in this
// process with hotlimit (the default); redislimit's RedisBackend shares
// them between instances through Redis, lease's Backend from leases of
// Redis budgets. A Pipeline (and so httplimit's middleware and
// grpclimit's interceptor) talks to each through these three methods
// only, and every backend implements all three: there is no optional
// method found at run time.
type Backend interface {
	// AllowStates admits a request only if every layer admits it, all
	// or nothing, as hotlimit.AllowLayersState does: either each layer
	// consumes its cost, or none does. It returns the Decision of the
	// binding layer (the one that refused the request, or, admitted, the
	// one with the fewest requests of its cost left) and that layer's
	// index in layers, or -1 when it cannot tell. A states that is not
	// nil has len(layers) elements; AllowStates sets states[i] to layer
	// i's own state right after the decision, as hotlimit.AllowLayersState
	// reports it, of which a Pipeline reads Decision.Remaining (the
	// RateLimit field's r), Next (its t: 0 when the layer is full,
	// hotlimit.Never when the backend cannot tell) and Policy (zero, with
	// Algorithm 0, when the backend cannot tell: the pipeline then
	// describes the policy of Config.Limits). A layer whose state it
	// cannot tell at all gets Decision.Remaining −1. It returns an error only when it
	// could not decide (a shared store unreachable, a timeout, a limit
	// it was not built with: ErrUnknownLimit); the pipeline then applies
	// its failure policy. It must not retain either slice.
	AllowStates(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error)
	// Reset returns key under the named limit to a fresh key's state
	// (full quota, nothing to wait for), as hotlimit.Limiter.Reset does.
	// A key the backend does not hold is already fresh: not an error.
	// It returns an error wrapping ErrUnknownLimit for a limit the
	// backend was not built with, or the store's error.
	Reset(ctx context.Context, limit, key string) error
	// Close releases what the backend holds (sweepers, leases, clients).
	Close() error
}

// Layer is one limit a request is checked against, as a Backend receives
// it: the limit by its name in Config.Limits, not by a limiter (as
// hotlimit.Layer and redislimit.Layer name theirs), so that a Backend
// may keep its limits anywhere. The key is built by the pipeline (see
// Pipeline.LayerKey).
type Layer struct {
	Limit string // the name of a limit the backend was built with
	Key   string // the request's key under that limit
	Cost  int64

	// lim is Limit's limiter in the *Local the Pipeline was built with,
	// resolved once by New, or nil (a Layer built outside this package,
	// or a Pipeline's with any other backend): that Local then uses it
	// rather than look the name up.
	lim *hotlimit.Limiter
}

// A BackendFactory builds a Backend for a set of named limits. Each policy
// is one of hotlimit's policy values (hotlimit.TokenBucket,
// hotlimit.FixedWindow, ...); a factory returns an error naming the limit
// for a policy it cannot serve.
type BackendFactory func(limits map[string]hotlimit.Policy) (Backend, error)

// ErrUnknownLimit is wrapped by a Backend's error for a layer that names a
// limit it was not built with.
var ErrUnknownLimit = errors.New("admission: unknown limit")

// Local is the in-process Backend: one hotlimit.Limiter per named limit,
// held by a hotlimit.Classes (so a limit's policy can also change at
// runtime, through Classes().SetPolicy).
type Local struct {
	classes *hotlimit.Classes
	names   []string            // the limits' names, sorted
	lims    []*hotlimit.Limiter // their limiters, in the same order

	groupsMu sync.Mutex
	groups   map[string]uint64 // groupNumber's numbers, by group name
}

var _ Backend = (*Local)(nil)

// LocalBackend returns a BackendFactory that builds a Local backend whose
// limiters all take opts (for example hotlimit.WithMaxKeys): one
// hotlimit.Limiter per named limit, as hotlimit.NewClasses builds them
// (its error names the limit; it needs at least one limit). The Backend
// it builds is a *Local. To build one outside a Pipeline (to share it
// between several, or to reach its Classes), call the factory:
//
//	b, err := admission.LocalBackend(opts...)(limits)
//	local, _ := b.(*admission.Local) // nil if err != nil
//
// A factory that returns b, func(map[string]hotlimit.Policy)
// (admission.Backend, error) { return b, nil }, then hands it to each
// Pipeline.
func LocalBackend(opts ...hotlimit.Option) BackendFactory {
	return func(limits map[string]hotlimit.Policy) (Backend, error) {
		c, err := hotlimit.NewClasses(limits, opts...)
		if err != nil {
			return nil, err // "hotlimit: class \"name\": ..."
		}
		b := &Local{classes: c, names: c.Names()}
		for _, name := range b.names {
			b.lims = append(b.lims, c.Class(name))
		}
		return b, nil
	}
}

// groupNumber returns the number that names group name in this backend's
// in-process keys (keys.go). It is one number per name for every Pipeline
// that shares the backend, so that a middleware's route group and an
// interceptor's method group of one name share their keys, and so their
// quota, as through any other backend, and groups of distinct names never
// do. A Pipeline asks once per group, in New.
func (b *Local) groupNumber(name string) uint64 {
	b.groupsMu.Lock()
	defer b.groupsMu.Unlock()
	n, ok := b.groups[name]
	if !ok {
		if b.groups == nil {
			b.groups = make(map[string]uint64)
		}
		n = uint64(len(b.groups))
		b.groups[name] = n
	}
	return n
}

// Classes returns the limits as a hotlimit.Classes: Classes().Class(name)
// is the limiter behind a named limit, Classes().Names() their names.
func (b *Local) Classes() *hotlimit.Classes { return b.classes }

// scanLimits is the most limits Local finds a layer's limiter among by
// comparing names in turn rather than through a map.
const scanLimits = 16

// limiter returns the limiter of the named limit, or nil. A Pipeline's
// layer names share their bytes with the backend's (both come from
// Config.Limits), so it first looks for the name's bytes among its own
// names' (a pointer and a length each, cheaper than hashing the name),
// then compares names.
func (b *Local) limiter(name string) *hotlimit.Limiter {
	if len(b.names) > scanLimits {
		return b.classes.Class(name)
	}
	p := unsafe.StringData(name)
	for i, n := range b.names {
		if unsafe.StringData(n) == p && len(n) == len(name) {
			return b.lims[i]
		}
	}
	for i, n := range b.names {
		if n == name {
			return b.lims[i]
		}
	}
	return nil
}

// AllowStates implements Backend with hotlimit.AllowLayersState, which
// computes no state for a nil states: each layer's state is
// that of its own decision. It allocates nothing for up to 8
// layers on keys the limiters hold. A states of another length than
// layers gets the states of the layers it has room for, and Remaining −1
// (unknown) past the last layer.
func (b *Local) AllowStates(_ context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	var buf [maxLayers]hotlimit.Layer
	var ls []hotlimit.Layer
	if len(layers) <= maxLayers {
		ls = buf[:len(layers)]
	} else {
		ls = make([]hotlimit.Layer, len(layers))
	}
	for i := range ls {
		ly := &layers[i]
		lim := ly.lim
		if lim == nil {
			lim = b.limiter(ly.Limit)
		}
		if lim == nil {
			return hotlimit.Decision{}, -1, fmt.Errorf("%w %q", ErrUnknownLimit, ly.Limit)
		}
		ls[i] = hotlimit.Layer{Limiter: lim, Key: ly.Key, Cost: ly.Cost}
	}
	d, i := hotlimit.AllowLayersState(states, ls...)
	for j := len(ls); j < len(states); j++ {
		states[j] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}} // no such layer: unknown
	}
	return d, i, nil
}

// Reset implements Backend with hotlimit.Limiter.Reset.
func (b *Local) Reset(_ context.Context, limit, key string) error {
	lim := b.limiter(limit)
	if lim == nil {
		return fmt.Errorf("%w %q", ErrUnknownLimit, limit)
	}
	lim.Reset(key)
	return nil
}

// Close stops every limiter's sweeper.
func (b *Local) Close() error { return b.classes.Close() }
