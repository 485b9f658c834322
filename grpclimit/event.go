package grpclimit

import (
	"context"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Event describes the decision on one call, for Config.Hook. It holds no
// key, identity value or token: only bounded names, so that a hook can
// label metrics with them.
type Event struct {
	// Context is the server-side context of the call (its peer, its
	// incoming metadata, its span). The metadata carries the client's
	// credentials: log fields of it, never the metadata wholesale.
	Context    context.Context
	FullMethod string // "/pkg.Service/Method"
	Group      string // the method group's name
	// Outcome is what the interceptor did: OutcomeAllowed, OutcomeDenied
	// (RATE_LIMIT_EXCEEDED), OutcomeDeniedNever (RATE_LIMIT_NEVER),
	// OutcomeExempt, OutcomeKeyDenied (RATE_LIMIT_KEY_MISSING),
	// OutcomeErrorAllowed or OutcomeErrorDenied (Unavailable); a call is
	// never priced nor dry-run, so never OutcomeCostInvalid or
	// OutcomeDryRunDenied.
	Outcome admission.Outcome
	// IdentityKind is the kind of identity the call was limited by: "tok"
	// (MetadataKey), "ip" (PeerKey, or the fallback to the peer), or a
	// FuncKey kind; "" when no key was extracted and for exempt calls. An
	// Interceptor reports at most 32 distinct kinds, then "other".
	IdentityKind string
	// Fallback reports that the key is the peer's because Config.Key
	// failed (admission.KeyErrorFallback).
	Fallback bool
	// Limit and Algorithm describe the binding limit: the one that
	// denied the call or, admitted, the one with the least left. Limit is
	// its name in Config.Limits and Algorithm its policy's type name
	// ("TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow",
	// "SlidingLog"). Both are empty when no limit decided (exempt calls,
	// key and backend failures) or the backend could not tell the
	// binding layer (Backend.AllowStates returned -1).
	Limit     string
	Algorithm string
	// Decision is the backend's decision; zero when there was none.
	Decision hotlimit.Decision
}
