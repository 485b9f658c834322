package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hotlimit/hotlimit"
)

// A Backend makes a Pipeline's decisions. The default, Local, keeps the
// limits in this process with hotlimit; redislimit provides one that
// shares them between instances through Redis. A Pipeline (and so
// httplimit's middleware and grpclimit's interceptor) talks to either
// through this interface only.
type Backend interface {
	// Allow admits a request only if every layer admits it, all or
	// nothing, exactly as hotlimit.AllowLayers: either each layer
	// consumes its cost, or none does, and the Decision reports the
	// binding layer. It returns an error only when it could not decide
	// (a shared store unreachable, a timeout); the pipeline then applies
	// its failure policy. It must not retain the layers slice.
	Allow(ctx context.Context, layers []Layer) (hotlimit.Decision, error)
}

// A BindingBackend is a Backend that also reports which layer its
// Decision describes, as hotlimit.AllowLayersIndex does. The pipeline
// then names exactly that layer's limit in Event.Limit (and in the
// RateLimit field, when the backend is not a StateBackend). Without it,
// the pipeline infers the layer from Decision.Limit, which cannot tell
// two layers of the same capacity apart; it then names the group's
// limit. Local and redislimit's backend implement it.
type BindingBackend interface {
	Backend
	// AllowBinding is Allow that also returns the index in layers of the
	// binding layer, or -1 when it cannot tell.
	AllowBinding(ctx context.Context, layers []Layer) (hotlimit.Decision, int, error)
}

// A StateBackend is a Backend that also reports each layer's own state
// after its decision. httplimit then writes one RateLimit item per layer,
// each with that limit's own r and t; without it, one item, for the
// binding layer. Local and redislimit's backend implement it.
type StateBackend interface {
	BindingBackend
	// AllowStates is AllowBinding that also sets states[i] to layer i's
	// state right after the decision (len(states) == len(layers)). A
	// backend that cannot tell a layer's state (a wrapper around a
	// backend that is not a StateBackend) sets its Remaining to -1; the
	// pipeline then reports the binding layer's item only. It must not
	// retain either slice.
	AllowStates(ctx context.Context, layers []Layer, states []LayerState) (hotlimit.Decision, int, error)
}

// Decide asks b to decide layers through the richest interface it has:
// StateBackend's AllowStates when states is not nil, else
// BindingBackend's AllowBinding, else Allow. It returns the binding
// layer's index, or -1 when b cannot tell, and marks states b cannot
// report as unknown (Remaining -1). A Backend that wraps another (to
// measure it, say) forwards through Decide, and so is a StateBackend
// whatever it wraps.
func Decide(ctx context.Context, b Backend, layers []Layer, states []LayerState) (hotlimit.Decision, int, error) {
	if states != nil {
		if sb, ok := b.(StateBackend); ok {
			return sb.AllowStates(ctx, layers, states)
		}
		for i := range states {
			states[i] = LayerState{Remaining: -1}
		}
	}
	if bb, ok := b.(BindingBackend); ok {
		return bb.AllowBinding(ctx, layers)
	}
	d, err := b.Allow(ctx, layers)
	return d, -1, err
}

// LayerState is one layer's own state after a decision, as the
// RateLimit field reports it per limit.
type LayerState struct {
	// Remaining is what the layer alone would admit now, in its units:
	// hotlimit.Decision.Remaining of its key. The field's r.
	Remaining int64
	// Window is how long Remaining stays the most the layer admits if
	// nothing else consumes: the time until its next unit comes back,
	// what hotlimit.Limiter.Check(key, Remaining+1).RetryAfter says of
	// the state the decision left (hotlimit.LayerState.Next). The
	// field's t, rounded up to seconds. 0 when the layer is full
	// (Remaining is its capacity: nothing comes back), hotlimit.Never
	// when the backend cannot tell; httplimit omits t in both cases.
	Window time.Duration
	// Policy describes the policy the layer was decided under, the
	// RateLimit-Policy item's q and w: a limit's policy may change at
	// runtime (Local.Classes().SetPolicy). Its zero value (Algorithm 0)
	// means the backend cannot tell; the pipeline then describes the
	// policy of Config.Limits.
	Policy hotlimit.PolicyInfo
}

// Layer is one limit a request is checked against, as a Backend receives
// it: the limit by its name in Config.Limits, not by a limiter (as
// hotlimit.Layer and redislimit.Layer name theirs), so that a Backend
// may keep its limits anywhere. The key is built by the pipeline (see
// LayerKey).
type Layer struct {
	Limit string // the name of a limit the backend was built with
	Key   string // the request's key under that limit
	Cost  int64
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
}

// LocalBackend returns a BackendFactory that builds a Local backend whose
// limiters all take opts (for example hotlimit.WithMaxKeys).
func LocalBackend(opts ...hotlimit.Option) BackendFactory {
	return func(limits map[string]hotlimit.Policy) (Backend, error) { return NewLocal(limits, opts...) }
}

// NewLocal builds one hotlimit.Limiter per named limit, as
// hotlimit.NewClasses does (its error names the limit). It needs at least
// one limit.
func NewLocal(limits map[string]hotlimit.Policy, opts ...hotlimit.Option) (*Local, error) {
	c, err := hotlimit.NewClasses(limits, opts...)
	if err != nil {
		return nil, err // "hotlimit: class \"name\": ..."
	}
	return &Local{classes: c}, nil
}

// Names returns the names of the backend's limits, sorted.
func (b *Local) Names() []string { return b.classes.Names() }

// Limiter returns the limiter behind a named limit, or nil.
func (b *Local) Limiter(name string) *hotlimit.Limiter { return b.classes.Class(name) }

// Classes returns the limits as a hotlimit.Classes.
func (b *Local) Classes() *hotlimit.Classes { return b.classes }

// Allow implements Backend with hotlimit.AllowLayers. It allocates
// nothing for up to 8 layers on existing keys.
func (b *Local) Allow(ctx context.Context, layers []Layer) (hotlimit.Decision, error) {
	d, _, err := b.AllowBinding(ctx, layers)
	return d, err
}

// AllowBinding implements BindingBackend with hotlimit.AllowLayersIndex.
func (b *Local) AllowBinding(ctx context.Context, layers []Layer) (hotlimit.Decision, int, error) {
	return b.AllowStates(ctx, layers, nil)
}

// AllowStates implements StateBackend with hotlimit.AllowLayersState:
// each layer's Remaining, Window and Policy are those of its own
// decision (see hotlimit.LayerState). A nil states reads none; a states
// of another length than layers gets the states of the layers it has
// room for, and Remaining −1 (unknown) past the last layer.
func (b *Local) AllowStates(_ context.Context, layers []Layer, states []LayerState) (hotlimit.Decision, int, error) {
	var buf [8]hotlimit.Layer
	ls := buf[:0]
	if len(layers) > len(buf) {
		ls = make([]hotlimit.Layer, 0, len(layers))
	}
	for _, ly := range layers {
		lim := b.classes.Class(ly.Limit)
		if lim == nil {
			return hotlimit.Decision{}, -1, fmt.Errorf("%w %q", ErrUnknownLimit, ly.Limit)
		}
		ls = append(ls, hotlimit.Layer{Limiter: lim, Key: ly.Key, Cost: ly.Cost})
	}
	if states == nil {
		d, i := hotlimit.AllowLayersIndex(ls...)
		return d, i, nil
	}
	d, i := allowStates(ls, states)
	return d, i, nil
}

// allowResolved is AllowStates (AllowBinding for a nil states) for a
// Pipeline, which found each layer's limiter once (infos[i].lim, see
// Pipeline.resolveLocal), has at most MaxLayers layers, and reads the
// states as hotlimit reports them (no copy into LayerStates).
func (b *Local) allowResolved(layers []Layer, infos []*limitInfo, states []hotlimit.LayerState) (hotlimit.Decision, int) {
	var buf [MaxLayers]hotlimit.Layer
	ls := buf[:len(layers)]
	for i := range ls {
		ls[i] = hotlimit.Layer{Limiter: infos[i].lim, Key: layers[i].Key, Cost: layers[i].Cost}
	}
	if states == nil {
		return hotlimit.AllowLayersIndex(ls...)
	}
	return hotlimit.AllowLayersState(states, ls...)
}

// allowStates decides ls with hotlimit.AllowLayersState and reports each
// layer's state in states. It is AllowStates' path with states, apart so
// that a decision without them does not zero the buffer.
func allowStates(ls []hotlimit.Layer, states []LayerState) (hotlimit.Decision, int) {
	var sbuf [8]hotlimit.LayerState
	each := sbuf[:]
	if len(ls) > len(sbuf) {
		each = make([]hotlimit.LayerState, len(ls))
	}
	d, i := hotlimit.AllowLayersState(each, ls...)
	n := min(len(states), len(ls))
	for j := range n {
		st := &each[j]
		states[j] = LayerState{Remaining: st.Decision.Remaining, Window: st.Next, Policy: st.Policy}
	}
	for j := n; j < len(states); j++ {
		states[j] = LayerState{Remaining: -1} // no such layer: unknown
	}
	return d, i
}

// A ResetBackend is a Backend that can also return a key to its fresh
// state, for Pipeline.Reset (and so Middleware.Reset and
// Interceptor.Reset). It is optional: a Backend without it still limits;
// only Reset then fails with ErrResetUnsupported. Local and redislimit's
// backend implement it.
type ResetBackend interface {
	Backend
	// Reset returns key under the named limit to a fresh key's state
	// (full quota, nothing to wait for), as hotlimit.Limiter.Reset does.
	// A key the backend does not hold is already fresh: not an error.
	// It returns an error wrapping ErrUnknownLimit for a limit the
	// backend was not built with, or the store's error.
	Reset(ctx context.Context, limit, key string) error
}

// ErrResetUnsupported is returned by Pipeline.Reset when its backend is
// not a ResetBackend, and by ResetVia.
var ErrResetUnsupported = errors.New("admission: the backend cannot reset keys")

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

// Close stops every limiter's sweeper.
func (b *Local) Close() error { return b.classes.Close() }
