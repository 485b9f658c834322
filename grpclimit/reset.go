package grpclimit

import "context"

// Reset unblocks a client: it returns every layer the identity is
// limited by (its layer in each method group, with Config.Global its
// global layer, and the Config.Identities layers keyed by it) to a fresh
// state, so its next calls are decided as a new client's. It is an
// administrative act, for an operator (a support ticket, a false
// positive), not part of serving calls.
//
// identity is what Config.Key writes for the client: "tok:" and the
// token's hash (admission.TokenIdentity computes it from the token, as
// MetadataKey hashes it), "ip:" and the address or prefix, or a FuncKey
// identity such as "tenant:acme". Resetting an identity the backend holds
// no state for does nothing. It returns the first error of the backend,
// after trying every layer.
func (ic *Interceptor) Reset(ctx context.Context, identity string) error {
	return ic.pipe.Reset(ctx, identity)
}

// LayerKey returns the key the interceptor limits identity by in method
// group group, or, for group "", the key of the global layer and of the
// Config.Identities layers, in its backend: for a shared store (Redis,
// leases) the rl:v1: layout's, for the in-process admission.Local a
// shorter form (admission.Pipeline.LayerKey). Use it to inspect a
// client's state in the backend. It returns "" for a group the
// interceptor does not have.
func (ic *Interceptor) LayerKey(identity, group string) string {
	return ic.pipe.LayerKey(identity, group)
}
