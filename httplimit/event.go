package httplimit

import (
	"net/http"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Event describes one decision, for Config.Hook.
type Event struct {
	// Request is the request decided on, for its method, path and the
	// like. It carries the client's credentials (an Authorization
	// header): log fields of it, never its headers wholesale.
	Request *http.Request
	Group   string // the route group
	// Outcome is what the middleware did: admission's outcomes, with
	// OutcomeDeniedNever for a 403 (a request that can never pass) and
	// OutcomeDenied for a 429.
	Outcome admission.Outcome
	// Refusal is what refused the request, or, under DryRun
	// (OutcomeDryRunDenied), what would have: admission.Result.Refusal.
	Refusal admission.Outcome
	// IdentityHash identifies the client without revealing it: a seeded
	// 64-bit hash of the identity (the KeyFunc's output, itself already
	// a hash for tokens), stable for the middleware's life and
	// meaningless outside it. 0 when no key was extracted.
	IdentityHash uint64
	// IdentityKind is the kind of identity the request was limited by:
	// "tok" (TokenKey), "ip" (IPKey or the fallback to the client IP),
	// or a ContextKey kind; "" when no key was extracted. A middleware
	// reports at most 32 distinct kinds, then "other", so it can label
	// metrics.
	IdentityKind string
	// Fallback reports that the key is the client IP because Config.Key
	// failed (admission.KeyErrorFallback).
	Fallback bool
	// Missing names the layer whose identity the request lacks
	// (OutcomeKeyDenied, or its DryRun), by its RateLimit item name: the
	// group's limit when Config.Key found none, an IdentityLimit's limit
	// when its Key found none; "" otherwise (admission.Result.Missing).
	Missing string
	// Algorithm and Limit describe the binding limit: the one that
	// refused the request, or, admitted, the one with the fewest requests
	// left. Empty for exempt requests and key and cost failures.
	Algorithm string
	Limit     string
	// PolicyVersion is Config.PolicyVersion.
	PolicyVersion string
	// Decision is the backend's decision (zero when there was none).
	Decision hotlimit.Decision
	// Err is the key extraction or backend error, if any.
	Err error
}

// Reason returns why the request was refused, or, under DryRun, why it
// would have been: Denial.Reason's words ("rate_limit_exceeded",
// "rate_limit_cost_exceeds_limit", "rate_limit_cost_invalid",
// "rate_limit_key_missing", "rate_limiter_unavailable"), or "" for a
// request that was admitted or exempt.
func (e *Event) Reason() string {
	o := e.Outcome
	if o == admission.OutcomeDryRunDenied {
		o = e.Refusal
	}
	switch o {
	case admission.OutcomeErrorDenied, admission.OutcomeErrorAllowed:
		return "rate_limiter_unavailable"
	case admission.OutcomeKeyDenied:
		return "rate_limit_key_missing"
	case admission.OutcomeCostInvalid:
		return "rate_limit_cost_invalid"
	case admission.OutcomeDeniedNever:
		return "rate_limit_cost_exceeds_limit"
	case admission.OutcomeDenied:
		return "rate_limit_exceeded"
	}
	return ""
}

// GroupCounts are one group's request counts by Outcome, counted from
// New on.
type GroupCounts struct {
	Group  string
	Counts [admission.OutcomeCount]uint64 // indexed by admission.Outcome
}

// Counts returns every group's counts, in Config.Groups order. Each count
// is read atomically; together they are not a snapshot of one instant.
// Counting costs each request one atomic add on its group's counter.
func (m *Middleware) Counts() []GroupCounts {
	out := make([]GroupCounts, len(m.groups))
	for i := range m.groups {
		g := &m.groups[i]
		out[i].Group = g.name
		for o := range g.counts {
			out[i].Counts[o] = g.counts[o].Load()
		}
	}
	return out
}
