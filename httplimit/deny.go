package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Denial describes a refused request, for Config.Deny.
type Denial struct {
	// Status is the status the default responder would write: 429 for a
	// request that may pass later, 403 for one that never can (its cost
	// is above a limit's capacity), 400 when its CostFunc failed, 503 for
	// a backend failure (without Config.FailOpen).
	Status int
	// Reason is "rate_limit_exceeded", "rate_limit_cost_exceeds_limit",
	// "rate_limit_cost_invalid", "rate_limit_key_missing" or
	// "rate_limiter_unavailable".
	Reason string
	// RetryAfter is the Retry-After value in seconds that the middleware
	// already set on the response, or 0 when it set none.
	RetryAfter int64
	// Decision is the backend's decision (zero for key, cost and backend
	// failures).
	Decision hotlimit.Decision
	// Policies are the RateLimit item names of the limits that refused
	// the request (for a refusal by a limit; nil otherwise).
	Policies []string
	// Missing names the layer whose identity the request lacks, for
	// "rate_limit_key_missing": admission.Event.Missing, the layer's RateLimit item
	// name (never the identity); "" otherwise.
	Missing string
}

// denialOf describes the refusal of ev.
func denialOf(ev *admission.Event, violated []string) Denial {
	switch ev.Outcome {
	case admission.OutcomeKeyDenied:
		return Denial{Status: http.StatusTooManyRequests, Reason: "rate_limit_key_missing", Missing: ev.Missing}
	case admission.OutcomeCostInvalid:
		return Denial{Status: http.StatusBadRequest, Reason: "rate_limit_cost_invalid"}
	case admission.OutcomeErrorDenied:
		return Denial{Status: http.StatusServiceUnavailable, Reason: "rate_limiter_unavailable"}
	case admission.OutcomeDeniedNever:
		return Denial{Status: http.StatusForbidden, Reason: "rate_limit_cost_exceeds_limit", Decision: ev.Decision, Policies: violated}
	}
	return Denial{Status: http.StatusTooManyRequests, Reason: "rate_limit_exceeded", RetryAfter: retryAfterSeconds(ev.Decision),
		Decision: ev.Decision, Policies: violated}
}

// denialBody is the default JSON body of a refused request.
type denialBody struct {
	Error      string `json:"error"`
	RetryAfter int64  `json:"retry_after,omitempty"`
	Missing    string `json:"missing,omitempty"`
}

// writeDenial is the default responder: d.Status and a small JSON body.
func writeDenial(w http.ResponseWriter, d Denial) {
	body, _ := json.Marshal(denialBody{Error: d.Reason, RetryAfter: d.RetryAfter, Missing: d.Missing})
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(d.Status)
	w.Write(append(body, '\n'))
}

// QuotaExceededType is the problem type of draft-ietf-httpapi-ratelimit-
// headers-11 for a request that exceeds one or more quota policies, the
// "type" of the Config.ProblemDetails body.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// problemBody is the RFC 9457 body of Config.ProblemDetails.
type problemBody struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail,omitempty"`
	Violated []string `json:"violated-policies"`
}

// writeProblem writes a refusal by a limit as an application/problem+json
// body of the quota-exceeded type.
func writeProblem(w http.ResponseWriter, d Denial) {
	p := problemBody{
		Type:     QuotaExceededType,
		Title:    "Request cannot be satisfied as assigned quota has been exceeded",
		Status:   d.Status,
		Violated: d.Policies,
	}
	if d.Status == http.StatusForbidden {
		p.Detail = "The request costs more than a quota it is limited by can ever hold: it will never be admitted."
	} else {
		p.Detail = "Retry in " + strconv.FormatInt(d.RetryAfter, 10) + " s."
	}
	body, _ := json.Marshal(p)
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(d.Status)
	w.Write(append(body, '\n'))
}
