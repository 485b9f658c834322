package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Group is a route group: routes that cost the same, limited together.
// Group routes by what they cost, not by how their URLs are spelled: the
// aliases of one endpoint ("/search", "/v1/search") belong to one group
// and share its quota.
type Group struct {
	// Name identifies the group in keys, headers, hooks and metrics:
	// letters, digits and "._-", at most 64 bytes.
	Name string
	// Patterns are net/http.ServeMux patterns ("GET /v1/search",
	// "/items/{id}", "api.example.com/"), matched as ServeMux matches
	// them, after cleaning the path, so "//v1/./search" is "/v1/search".
	// A request matching no pattern of any group is in DefaultGroup.
	Patterns []string
	// Limit names the policy in Config.Limits this group's layer uses.
	// Required unless Exempt.
	Limit string
	// Cost is what one request costs in that limit; 0 means 1. New
	// refuses a Cost above the limit's capacity (the q of its
	// RateLimit-Policy item): every request would be refused with 403.
	Cost int64
	// CostFunc, if set, prices each request instead of Cost: a request
	// whose work varies (a GraphQL query by its complexity, an export by
	// its size) costs what CostFunc returns, computed from the request
	// or read from its context (see WithCost and CostFromContext). 0 is
	// free in the group's limit: it consumes nothing there and the
	// headers show the state. The price applies to the group's limit
	// only: Config.Global charges GlobalCost for every request, a free
	// one too, and may refuse it.
	// A cost above the limit's capacity can never pass (403, see the
	// package documentation). An error, or a cost below 0, refuses the
	// request with 400 and {"error":"rate_limit_cost_invalid"}
	// (OutcomeCostInvalid, admission.Event.Err set): a request the application
	// cannot price is not let through unlimited. It is called once per
	// request, after the key is extracted, on the request's goroutine.
	CostFunc func(*http.Request) (int64, error)
	// Exempt marks a group that is not limited at all (health checks,
	// metrics scrapes). It is the only way a route bypasses the limits,
	// and its requests are still counted and reported to the hook.
	Exempt bool
}

// Config configures a Middleware. Limits, Groups and DefaultGroup are
// required.
type Config struct {
	// Limits are the named policies: hotlimit.TokenBucket,
	// hotlimit.FixedWindow, ... values (or pointers), passed to Backend.
	// Names are letters, digits and "._-", at most 64 bytes.
	Limits map[string]hotlimit.Policy
	// Groups are the route groups.
	Groups []Group
	// DefaultGroup names the group of a request that no pattern matches.
	DefaultGroup string
	// Classify, if set, replaces pattern matching: it returns the name
	// of the request's group. An unknown name means DefaultGroup.
	Classify func(*http.Request) string
	// Key extracts the identity a request is limited by. nil: the
	// client IP that ClientIP finds (IPKey(ClientIP)), so that behind a
	// proxy the ClientIP is given once, here, for the key and for
	// every fallback. A nil Key gives the keys IPKey(ClientIP) gives,
	// for less: the pipeline takes the address itself, and the
	// in-process backend's keys hold an IPv4 client's 4 bytes with no
	// text written and parsed back (the same for a nil
	// IdentityLimit.Key).
	Key admission.KeyFunc[*http.Request]
	// Global, if set, names a limit applied to every request's identity
	// on top of its group's, all or nothing: a request the global layer
	// denies does not consume its group's quota, and the other way round.
	// It is a budget per identity across groups; one budget shared by
	// every client is an IdentityLimit keyed by admission.Everyone.
	Global string
	// GlobalCost is what one request costs in Global; 0 means 1. New
	// refuses a GlobalCost above Global's capacity (every request would
	// be refused with 403).
	GlobalCost int64
	// Identities are limits by identities of their own, checked on every
	// request of every limited group together with its group's layer and
	// the global one, all or nothing: a per-IP limit next to a per-token
	// one, a per-tenant one (see IdentityLimit). Each has its own item in
	// the RateLimit fields. At most 6.
	Identities []IdentityLimit
	// ExemptIdentities lists identities (as Key writes them, such as
	// "tenant:internal") that are never limited. Requests from them are
	// still counted and reported to the hook as OutcomeExempt.
	ExemptIdentities []string
	// ClientIP finds the client address (behind trusted proxies, see
	// admission.NewClientIP) for a nil Key or IdentityLimit.Key and for
	// FallbackToIP. nil: the peer address only.
	ClientIP *admission.ClientIP
	// FallbackToIP limits a request whose identity Key cannot extract by
	// its client IP instead (IPKey(ClientIP)), under the same layers; if
	// even the IP cannot be found, the request is refused as without it.
	// false, the default, refuses it: 429 without Retry-After (the
	// request can never pass as it is) and the body
	// {"error":"rate_limit_key_missing","missing":"per-tenant"}, where
	// missing names the layer whose identity the request lacks by its
	// RateLimit item name (the group's limit when Key found none, an
	// IdentityLimit's when its Key found none), never the identity.
	FallbackToIP bool
	// FailOpen lets a request through without rate-limit headers when the
	// backend cannot decide (a shared store down, a timeout). false, the
	// default, fails closed: 503 Service Unavailable with
	// {"error":"rate_limiter_unavailable"} and no rate-limit headers: a
	// 503, not a 429, because the client did nothing wrong and has no
	// quota to wait for; a 429 with invented headers would be a lie.
	FailOpen bool
	// Headers selects the rate-limit header fields. Default HeadersIETF.
	Headers HeaderMode
	// Reset selects the form of X-RateLimit-Reset. Default ResetSeconds.
	Reset ResetMode
	// ProblemDetails makes a request refused by a limit answer with an
	// RFC 9457 application/problem+json body of the draft's
	// "quota-exceeded" problem type, listing the limits it exceeded in
	// "violated-policies" (by their RateLimit item names), instead of the
	// default JSON body. Config.Deny, if set, still takes precedence.
	ProblemDetails bool
	// DryRun makes every decision (consuming quota, counting, calling
	// the hook, with OutcomeDryRunDenied for a denial) but lets every
	// request through at once and writes no rate-limit headers: a limit
	// can be dark-launched and watched before it is enforced. It
	// overrides the denial of a request without a key and a CostFunc's failure
	// (OutcomeDryRunDenied, admission.Event.Err set) and the 503 of a
	// backend failure without FailOpen (OutcomeErrorAllowed), and waits out no LeakyBucket
	// Delay.
	DryRun bool
	// Hook, if set, is called synchronously once per request, before the
	// handler or the denial, for logging and metrics: on the request's
	// goroutine, so concurrently for concurrent requests. It must be
	// fast, safe for concurrent use, and must not write to the response.
	Hook func(admission.Event)
	// Deny, if set, writes refused responses in place of the default
	// JSON body, e.g. {"error":"rate_limit_exceeded","retry_after":12}.
	// The rate-limit headers and Retry-After are already set; Deny must
	// call WriteHeader with a status (Denial.Status is the default's).
	Deny func(w http.ResponseWriter, r *http.Request, d Denial)
	// Backend builds the backend from Limits. nil: LocalBackend().
	Backend admission.BackendFactory
	// Observers see every decision the backend makes or fails to make,
	// with how long it took: promlimit's BackendMetrics and otellimit's
	// HTTP observe the middleware this way, without wrapping its backend.
	Observers []admission.Observer
	// PolicyVersion is reported in every hook's admission.Event, to tell which
	// configuration made a decision.
	PolicyVersion string
	// Now reads the wall clock for ResetEpoch. nil: time.Now.
	Now func() time.Time
	// Wait is how an admitted request waits out a LeakyBucket's
	// Decision.Delay (shaping) before the handler is called. It returns
	// an error if the request's context ends first; the request is then
	// dropped without a response (the client has gone) and the quota
	// stays spent. nil: a timer, in real time.
	Wait func(ctx context.Context, d time.Duration) error
}

// IdentityLimit limits every request by an identity of its own, as a
// layer of the same all-or-nothing decision as the group's layer and
// Config.Global: a request one of them refuses consumes nothing in the
// others. Its key is the identity's (Middleware.LayerKey(identity, "")),
// one quota per identity across all groups.
type IdentityLimit struct {
	// Limit names its policy in Config.Limits. No other layer (a group,
	// Config.Global, another IdentityLimit) may use it: its RateLimit
	// items are named after it.
	Limit string
	// Key extracts the identity: TokenKey, ContextKey,
	// admission.Everyone, ... nil: the client IP that Config.ClientIP
	// finds.
	Key admission.KeyFunc[*http.Request]
	// Cost is what one request costs there; 0 means 1. New refuses a
	// Cost above the limit's capacity.
	Cost int64
	// FallbackToIP keys the layer by the client IP (Config.ClientIP) when
	// Key finds no identity; false, the default, refuses the request.
	FallbackToIP bool
}

// checkFields validates the fields that need no other field, in the
// order New reports them. It normalises cfg.ClientIP in place (see
// admission.ClientIP.Validate).
func (cfg *Config) checkFields() error {
	switch {
	case len(cfg.Groups) == 0:
		return errors.New("httplimit: Config.Groups is empty")
	case cfg.Headers > HeadersNone:
		return fmt.Errorf("httplimit: Config.Headers %d is not a HeaderMode", cfg.Headers)
	case cfg.Reset > ResetEpoch:
		return fmt.Errorf("httplimit: Config.Reset %d is not a ResetMode", cfg.Reset)
	case cfg.GlobalCost < 0:
		return fmt.Errorf("httplimit: Config.GlobalCost must be ≥ 0, got %d", cfg.GlobalCost)
	}
	if cfg.ClientIP != nil {
		if err := cfg.ClientIP.Validate(); err != nil {
			return fmt.Errorf("httplimit: Config.%w", err)
		}
	}
	return nil
}

// waitTimer is the default Config.Wait.
func waitTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
