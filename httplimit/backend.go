package httplimit

import (
	"context"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// The backend contract lives in package admission, the decision pipeline
// httplimit and grpclimit share; these names are its own, so that a
// backend written for one transport serves the other.
type (
	// Backend is admission.Backend: what makes the middleware's decisions.
	Backend = admission.Backend
	// BindingBackend is admission.BindingBackend: a Backend that reports
	// the binding layer.
	BindingBackend = admission.BindingBackend
	// StateBackend is admission.StateBackend: a Backend that reports
	// every layer's own state after the decision.
	StateBackend = admission.StateBackend
	// ResetBackend is admission.ResetBackend: a Backend that can return a
	// key to its fresh state.
	ResetBackend = admission.ResetBackend
	// BackendFactory is admission.BackendFactory.
	BackendFactory = admission.BackendFactory
	// Layer is admission.Layer: one limit a request is checked against,
	// as a Backend receives it.
	Layer = admission.Layer
	// LayerState is admission.LayerState: one layer's own state after a
	// decision.
	LayerState = admission.LayerState
	// Local is admission.Local: the in-process Backend.
	Local = admission.Local
)

// ErrUnknownLimit is admission.ErrUnknownLimit, and ErrResetUnsupported
// admission.ErrResetUnsupported.
var (
	ErrUnknownLimit     = admission.ErrUnknownLimit
	ErrResetUnsupported = admission.ErrResetUnsupported
)

// LocalBackend is admission.LocalBackend: a BackendFactory that builds a
// Local backend whose limiters all take opts.
func LocalBackend(opts ...hotlimit.Option) BackendFactory { return admission.LocalBackend(opts...) }

// NewLocal is admission.NewLocal: one hotlimit.Limiter per named limit.
func NewLocal(limits map[string]hotlimit.Policy, opts ...hotlimit.Option) (*Local, error) {
	return admission.NewLocal(limits, opts...)
}

// Decide is admission.Decide: it asks b through the richest interface it
// has.
func Decide(ctx context.Context, b Backend, layers []Layer, states []LayerState) (hotlimit.Decision, int, error) {
	return admission.Decide(ctx, b, layers, states)
}

// ResetVia is admission.ResetVia.
func ResetVia(ctx context.Context, b Backend, limit, key string) error {
	return admission.ResetVia(ctx, b, limit, key)
}
