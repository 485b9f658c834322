// Package httplimit is net/http middleware that rate-limits requests with
// hotlimit. It uses the standard library only.
//
// # How a request is decided
//
// The middleware puts each request in a route group (Group), by
// http.ServeMux patterns or by Config.Classify. Groups are made by what
// routes cost, not by how URLs are spelled: the aliases of an endpoint
// share one group and one quota, and each group names its policy and a
// cost per request. Config.Key then extracts the client's identity, and
// the request is checked against up to two layers, all or nothing (see
// Backend): the group's layer, keyed like
//
//	rl:v1:tok:9f86d081884c7d659a2feaa0c55ad015:route:search
//
// and, if Config.Global is set, a global layer per identity,
//
//	rl:v1:tok:9f86d081884c7d659a2feaa0c55ad015
//
// A request the global layer denies consumes nothing in its group, and the
// other way round. The "v1" is the key format's version: a change of
// format changes it, so old and new keys never mix in a shared store.
//
// Each layer is a Layer: a limit named in Config.Limits, a key and a
// cost, which is what a Backend receives. It is not hotlimit.Layer (a
// *hotlimit.Limiter, a key and a cost, for hotlimit.AllowLayers, which
// Local calls) nor redislimit.Layer (a *redislimit.Limiter, a key and a cost):
// the same idea, one layer of an all-or-nothing decision, at three
// levels, each naming its limit the way its level knows it.
//
// The middleware decides only through a Backend: Local (the default,
// in-process hotlimit limiters, one per named limit) or a shared one such
// as redislimit's, built by Config.Backend from Config.Limits.
//
// # Keys
//
// TokenKey limits by an API token from a header or a Bearer credential,
// hashed (the raw token never reaches the limiter, a hook or a log);
// ContextKey by a user or tenant the application authenticated and put in
// the request's context; IPKey by the client's IP prefix. Every identity
// is normalised (trimmed, Bearer scheme stripped, addresses unmapped and
// grouped) and escaped so that no client can forge another's key.
//
// When the key cannot be extracted, Config.OnKeyError decides: deny (the
// default) or fall back to the client IP. Nothing is ever let through
// unlimited, except through configuration: an Exempt group, an identity
// in Config.ExemptIdentities, FailOpen when the backend fails, or DryRun.
//
// # Client IP
//
// ClientIP uses the connection's peer address and ignores forwarding
// headers, unless the peer is a configured trusted proxy; then it walks
// X-Forwarded-For (or RFC 7239 Forwarded) from the right, across every
// header line, to the first address that is not a trusted proxy. See
// ClientIP for the details, including how malformed headers are handled
// (they never panic and never choose the key).
//
// # Responses
//
// A denied request gets 429 Too Many Requests, the handler is not called,
// the body is {"error":"rate_limit_exceeded","retry_after":12} (replace it
// with Config.Deny), and Retry-After is the exact wait rounded up to whole
// seconds, at least 1; both are omitted when the request can never pass
// (its cost exceeds the policy's capacity).
//
// Rate-limit header fields, per Config.Headers, follow the Decision that
// the backend returned for this request:
//
//	RateLimit-Policy: "search";q=10;w=60, "global";q=1000;w=3600
//	RateLimit: "search";r=3;t=42
//
// RateLimit-Policy lists the request's layers (q and w per algorithm: see
// below); RateLimit names the binding layer (the one with the fewest
// requests left, or the one that denied; Local and redislimit report
// which it is, see BindingBackend, and for a backend that does not, the
// middleware tells the layers apart by capacity and names the group's
// when both have the same q) with r = Decision.Remaining and
// t = ceil(RetryAfter) seconds on a denial (the wait after which the
// same request passes) or ceil(ResetAfter) seconds on an admission. With a global layer, the
// backend returns one Decision for both layers, whose ResetAfter is the
// larger of the two (hotlimit.AllowLayers): t is then the time until
// every layer of the request is back to its full quota, which may be the
// other layer's. Both are rounded up, so retrying after t or Retry-After
// seconds is never too early. The
// draft (draft-ietf-httpapi-ratelimit-headers-11) warns clients not to
// read t as a promise of a full quota; for the buckets, units also come
// back continuously before t. X-RateLimit-Limit, -Remaining and -Reset
// carry q, r and t (or t as an epoch, Config.Reset).
//
// How each algorithm maps to the draft's quota q and window w:
//
//   - FixedWindow, SlidingWindow, SlidingLog: q = Limit, w = Window.
//   - TokenBucket (no window of its own): q = Burst and w = the time an
//     empty bucket takes to refill Burst, Burst × interval; so q per w is
//     the sustained rate, and a full bucket admits q at once.
//   - LeakyBucket: q = Capacity+1 (one starts at once, Capacity wait), w =
//     q × interval, the time the queue takes to drain.
//
// w is in whole seconds, rounded up, at least 1.
//
// # Operations
//
// Config.DryRun decides and counts every request (consuming quota) but
// lets all through at once without headers, to dark-launch a limit: not
// even a missing key, a failing backend or a LeakyBucket's Delay holds a
// request back. Config.Hook sees every decision: route group, an identity
// hash (never the identity), algorithm, Config.PolicyVersion, the Outcome
// and the Decision.
// Middleware.Counts returns per-group counts by Outcome (one atomic add
// per request), which promlimit exports to Prometheus.
//
// When the backend cannot decide (a shared store is down),
// Config.OnBackendError applies: FailClosed (the default) answers 503
// Service Unavailable, FailOpen lets the request through.
//
// # Cost
//
// An allowed request with a Bearer token, a group layer and a global
// layer, IETF headers on, costs about 1.5 µs and 3 allocations (104 B:
// the key string, and the RateLimit header value and its slice) on a
// shared 2-vCPU Xeon VM with Go 1.26.8 (go test -run X -bench Middleware
// -benchtime 200000x -count 5 ./httplimit). By profile, a third of it is
// the two limiter layers, a fifth ServeMux matching, and the rest SHA-256
// of the token and writing the headers.
//
// # Leaky buckets
//
// A LeakyBucket admits a request with a Delay: the middleware waits it
// out (Config.Wait) before calling the handler, so the handler sees the
// shaped rate; if the client goes away meanwhile, the handler is not
// called.
package httplimit
