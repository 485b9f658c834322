package httplimit

import (
	"encoding/json"
	"net/http"

	"github.com/hotlimit/hotlimit"
)

// Denial describes a refused request, for Config.Deny.
type Denial struct {
	// Status is the status the default responder would write: 429, or
	// 503 for a backend failure under FailClosed.
	Status int
	// Reason is "rate_limit_exceeded", "rate_limit_key_missing" or
	// "rate_limiter_unavailable".
	Reason string
	// RetryAfter is the Retry-After value in seconds that the middleware
	// already set on the response, or 0 when it set none.
	RetryAfter int64
	// Decision is the backend's decision (zero for key and backend
	// failures).
	Decision hotlimit.Decision
}

// denialBody is the default JSON body of a refused request.
type denialBody struct {
	Error      string `json:"error"`
	RetryAfter int64  `json:"retry_after,omitempty"`
}

// writeDenial is the default responder: d.Status and a small JSON body.
func writeDenial(w http.ResponseWriter, d Denial) {
	body, _ := json.Marshal(denialBody{Error: d.Reason, RetryAfter: d.RetryAfter})
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(d.Status)
	w.Write(append(body, '\n'))
}
