package httplimit

import "context"

// Reset unblocks a client: it returns every layer the identity is
// limited by (its layer in each route group, with Config.Global its
// global layer, and the Config.Identities layers keyed by it) to a fresh
// state, so its next requests are decided as a new client's. It is an
// administrative act, for an operator (a support ticket, a false
// positive), not part of serving requests.
//
// identity is what a KeyFunc writes for the client: "tok:" and the
// token's hash (TokenIdentity computes it from the token), "ip:" and the
// address or prefix ("ip:192.0.2.1", "ip:2001:db8:1:2::/64"), or a
// ContextKey identity such as "tenant:acme". Resetting an identity the
// backend holds no state for does nothing. It returns the first error of
// the backend, after trying every layer.
func (m *Middleware) Reset(ctx context.Context, identity string) error {
	return m.pipe.Reset(ctx, identity)
}
