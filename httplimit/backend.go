package httplimit

import (
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// The backend contract lives in package admission, the decision pipeline
// httplimit and grpclimit share; these names are its own, so that a
// backend written for one transport serves the other.
type (
	// Backend is admission.Backend: what makes the middleware's decisions.
	Backend = admission.Backend
	// BackendFactory is admission.BackendFactory.
	BackendFactory = admission.BackendFactory
	// Layer is admission.Layer: one limit a request is checked against,
	// as a Backend receives it.
	Layer = admission.Layer
	// Local is admission.Local: the in-process Backend.
	Local = admission.Local
)

// ErrUnknownLimit is admission.ErrUnknownLimit.
var ErrUnknownLimit = admission.ErrUnknownLimit

// LocalBackend is admission.LocalBackend: a BackendFactory that builds a
// Local backend whose limiters all take opts.
func LocalBackend(opts ...hotlimit.Option) BackendFactory { return admission.LocalBackend(opts...) }

// NewLocal is admission.NewLocal: one hotlimit.Limiter per named limit.
func NewLocal(limits map[string]hotlimit.Policy, opts ...hotlimit.Option) (*Local, error) {
	return admission.NewLocal(limits, opts...)
}
