package httplimit

import "github.com/hotlimit/hotlimit/admission"

// Reason returns why the request of a hook's Event was refused, or, under
// DryRun, why it would have been: Denial.Reason's words
// ("rate_limit_exceeded", "rate_limit_cost_exceeds_limit",
// "rate_limit_cost_invalid", "rate_limit_key_missing",
// "rate_limiter_unavailable"), or "" for a request that was admitted or
// exempt.
func Reason(e *admission.Event) string {
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

// Counts returns every group's counts, in Config.Groups order. Each count
// is read atomically; together they are not a snapshot of one instant.
// Counting costs each request one atomic add on its group's counter.
func (m *Middleware) Counts() []admission.GroupCounts {
	out := make([]admission.GroupCounts, len(m.groups))
	for i := range m.groups {
		g := &m.groups[i]
		out[i].Group = g.name
		for o := range g.counts {
			out[i].Counts[o] = g.counts[o].Load()
		}
	}
	return out
}
