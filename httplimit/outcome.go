package httplimit

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/hotlimit/hotlimit"
)

// Outcome is what the middleware did with one request.
type Outcome uint8

// The outcomes, in the order of Counts' arrays.
const (
	OutcomeAllowed      Outcome = iota // the backend admitted it
	OutcomeDenied                      // the backend denied it: 429, or 403 when it can never pass
	OutcomeDryRunDenied                // the backend denied it, or no key or cost could be had, but DryRun let it through
	OutcomeExempt                      // an exempt group or identity: not limited
	OutcomeKeyDenied                   // no key could be extracted: denied
	OutcomeErrorAllowed                // the backend failed, FailOpen (or DryRun) let it through
	OutcomeErrorDenied                 // the backend failed, FailClosed answered 503
	OutcomeCostInvalid                 // the group's CostFunc failed or priced it below 0: 400
	OutcomeCount                       // the number of outcomes, the length of GroupCounts.Counts
)

var outcomeNames = [OutcomeCount]string{"allowed", "denied", "dry_run_denied", "exempt", "key_denied", "error_allowed", "error_denied", "cost_invalid"}

// String returns the outcome's snake_case name, as used in metrics.
func (o Outcome) String() string {
	if o < OutcomeCount {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Passed reports whether the handler was called.
func (o Outcome) Passed() bool {
	return o == OutcomeAllowed || o == OutcomeDryRunDenied || o == OutcomeExempt || o == OutcomeErrorAllowed
}

// Event describes one decision, for Config.Hook.
type Event struct {
	// Request is the request decided on, for its method, path and the
	// like. It carries the client's credentials (an Authorization
	// header): log fields of it, never its headers wholesale.
	Request *http.Request
	Group   string  // the route group
	Outcome Outcome // what the middleware did
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
	// failed (KeyErrorFallbackIP).
	Fallback bool
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
	switch e.Outcome {
	case OutcomeErrorDenied, OutcomeErrorAllowed:
		return "rate_limiter_unavailable"
	case OutcomeKeyDenied:
		return "rate_limit_key_missing"
	case OutcomeCostInvalid:
		return "rate_limit_cost_invalid"
	case OutcomeDenied, OutcomeDryRunDenied:
		var ce costError
		switch {
		case errors.As(e.Err, &ce):
			return "rate_limit_cost_invalid"
		case e.Err != nil:
			return "rate_limit_key_missing"
		case e.Decision.RetryAfter == hotlimit.Never:
			return "rate_limit_cost_exceeds_limit"
		}
		return "rate_limit_exceeded"
	}
	return ""
}

// GroupCounts are one group's request counts by Outcome, counted from
// New on.
type GroupCounts struct {
	Group  string
	Counts [OutcomeCount]uint64 // indexed by Outcome
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
