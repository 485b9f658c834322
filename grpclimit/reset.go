package grpclimit

import (
	"context"

	"github.com/hotlimit/hotlimit/httplimit"
)

// Reset unblocks a client: it returns every layer the identity is
// limited by (its layer in each method group and, with Config.Global,
// its global layer) to a fresh state, so its next calls are decided as a
// new client's. It is an administrative act, for an operator (a support
// ticket, a false positive), not part of serving calls.
//
// identity is what Config.Key writes for the client: "tok:" and the
// token's hash (httplimit.TokenIdentity computes it from the token, as
// MetadataKey hashes it), "ip:" and the address or prefix, or a FuncKey
// identity such as "tenant:acme". Resetting an identity the backend holds
// no state for does nothing. It returns httplimit.ErrResetUnsupported
// when the backend is not an httplimit.ResetBackend, else the first error
// of the backend, after trying every layer.
func (ic *Interceptor) Reset(ctx context.Context, identity string) error {
	rb, ok := ic.backend.(httplimit.ResetBackend)
	if !ok {
		return httplimit.ErrResetUnsupported
	}
	var first error
	reset := func(limit, key string) {
		if err := rb.Reset(ctx, limit, key); err != nil && first == nil {
			first = err
		}
	}
	for i := range ic.groups {
		if g := &ic.groups[i]; !g.exempt {
			reset(g.limit, httplimit.LayerKey(identity, g.name))
		}
	}
	if ic.global != "" {
		reset(ic.global, httplimit.LayerKey(identity, ""))
	}
	return first
}
