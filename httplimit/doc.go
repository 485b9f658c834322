// Package httplimit is net/http middleware that rate-limits requests with
// hotlimit. It uses the standard library only.
//
// The common case is one line: ByIP(hotlimit.PerMinute(100)) limits every
// client IP to 100 requests a minute, ByToken("Authorization", rate) every
// API token; New with a Config does the rest (route groups of their own
// cost and policy, a global layer, trusted proxies, header modes).
//
// # How a request is decided
//
// The middleware puts each request in a route group (Group), by
// http.ServeMux patterns or by Config.Classify. Groups are made by what
// routes cost, not by how URLs are spelled: the aliases of an endpoint
// share one group and one quota, and each group names its policy and a
// cost per request. Config.Key then extracts the client's identity, and
// the request is checked against its layers, all or nothing (see
// Backend): the group's layer, keyed like
//
//	rl:v1:tok:9f86d081884c7d659a2feaa0c55ad015:route:search
//
// and, if Config.Global is set, a global layer per identity,
//
//	rl:v1:tok:9f86d081884c7d659a2feaa0c55ad015
//
// and one layer per Config.Identities entry, keyed by an identity of its
// own (the client IP next to the token, a tenant):
//
//	rl:v1:ip:192.0.2.1
//
// A request one layer denies consumes nothing in the others. These are
// the keys of a shared store (redislimit's backends, leases): the "v1" is
// the key format's version, a change of format changes it, so old and
// new keys never mix there. The in-process admission.Local gets the same
// keys in a shorter form, without the version and with the group named
// by a number, so that an IPv4 client's fit the 15 bytes a hotlimit
// slot holds inline; Middleware.LayerKey gives the middleware's keys. The decision itself is package
// admission's Pipeline, which grpclimit shares; the middleware adds route
// groups and HTTP answers. By(PerIP(rate), PerToken(header, rate)) is the
// one-line form of several identities.
//
// Each layer is an admission.Layer: a limit named in
// Config.Limits, a key and a cost, which is what an admission.Backend receives. It
// is not hotlimit.Layer (a
// *hotlimit.Limiter, a key and a cost, for hotlimit.AllowLayers, which
// admission.Local calls) nor redislimit.Layer (a *redislimit.Limiter, a key and a cost):
// the same idea, one layer of an all-or-nothing decision, at three
// levels, each naming its limit the way its level knows it.
//
// The middleware decides only through an admission.Backend: admission.Local (the default,
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
// When the key cannot be extracted, the request is denied (the default)
// or, with Config.FallbackToIP, limited by its client IP. Nothing is ever let through
// unlimited, except through configuration: an Exempt group, an identity
// in Config.ExemptIdentities, Config.FailOpen when the backend fails, or
// DryRun.
//
// # Client IP
//
// An admission.ClientIP (built with admission.NewClientIP) uses the
// connection's peer address and ignores forwarding headers, unless the
// peer is a configured trusted proxy; then it walks X-Forwarded-For (or
// RFC 7239 Forwarded) from the right, across every header line, to the
// first address that is not a trusted proxy. grpclimit finds a call's
// client with the same ClientIP under the same rules. See
// admission.ClientIP for the details, including how malformed headers are
// handled (they never panic and never choose the key).
//
// # Responses
//
// A request refused by a limit is not passed to the handler. When it can
// pass later it gets 429 Too Many Requests, Retry-After (the exact wait
// until the same request is admitted, rounded up to whole seconds, at
// least 1: retrying then is never too early) and the body
// {"error":"rate_limit_exceeded","retry_after":12}. When it can never
// pass, because its cost exceeds a limit's capacity, it gets 403
// Forbidden, no Retry-After and {"error":"rate_limit_cost_exceeds_limit"}:
// a client tells "never" from "later" by the status, and clients that
// retry 429s (httpretry among them) do not retry it. Config.Deny replaces
// the body; Config.ProblemDetails makes it an RFC 9457
// application/problem+json body of the draft's "quota-exceeded" type
// (QuotaExceededType) whose "violated-policies" lists the limits the
// request exceeded. A request without an identity a layer needs (no
// token, no tenant, and no Config.FallbackToIP) gets 429, no Retry-After and
// {"error":"rate_limit_key_missing","missing":"per-tenant"}: missing
// names that layer by its RateLimit item name, as the RateLimit fields
// and "violated-policies" name layers, never by the identity
// (Denial.Missing for a Config.Deny).
//
// # Rate-limit header fields
//
// With Config.Headers at its default, every limited response (admitted or
// refused by a limit) carries the RateLimit-Policy and RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers-11, one item per limit the request
// is checked against (its group's, the global one, and each
// Config.Identities layer's):
//
//	RateLimit-Policy: "search";q=10;w=60, "global";q=1000;w=3600
//	RateLimit: "search";r=3;t=42, "global";r=917;t=4
//
// Each RateLimit item describes its own limit for this client: r is what
// the limit would admit now (hotlimit.Decision.Remaining of its key) and t
// is its effective window, the time during which r stays the most it
// admits: the seconds until its next unit comes back
// (hotlimit.Limiter.Check(key, r+1).RetryAfter), rounded up, so that
// after t seconds the limit holds at least r+1 units if nothing else
// spent them. For a fixed window that is the end of the window, for the
// buckets the refill of one unit, for the sliding log the moment the
// oldest counted request leaves the window (at most w), and for the
// sliding window the moment enough of the past stops counting, which can
// be up to two windows away: the current window's count becomes the
// previous window's when it ends, and its weight then fades over the
// whole next window. A client that spent its quota 27 s into a 60 s
// sliding window is told t=93 (33 s to the window's end, and most of the
// next window before one unit's weight has gone); later requests see t
// shrink with the clock (63, 53, ...). docs/semantics.md in the
// repository defines Remaining and RetryAfter for each algorithm exactly.
// An item without t is a full limit: nothing to wait for.
//
// r and t come from the decision itself: r is the Remaining its layer
// reported and t is computed from the state it left, at its instant
// (hotlimit.AllowLayersState), never from a second reading that another
// request could have changed; when a sliding window's or log's state
// changed before t could be computed, the item has no t. q and w in
// RateLimit-Policy describe the policy the request was decided under, so
// a policy changed at runtime (admission.Local.Classes().SetPolicy) shows at once.
// Retry-After is never earlier than the t of an item whose r is below
// the request's cost there (a limit it exceeded); an item the request did
// not exceed may have a later t, which then bounds only what the client
// may spend there. The draft reminds clients that t does not promise a
// full quota; the RateLimit-Policy item gives the whole quota.
//
// Items are named after their limit in Config.Limits. When Config.Global
// names the same limit as the request's group, the global layer's item is
// named with the suffix "/global" ("l" and "l/global"): the two are
// different quotas of one policy, and "/" is in no limit's name.
//
// r and t per limit come from the layers' states the Backend reports
// (Local and redislimit's backend report them all). When a backend
// reports the layers' states as unknown (a cached denial), the field has
// one RateLimit item, the binding layer's (the one that refused the
// request, or that has the fewest requests left; the group's, when a
// backend that cannot tell which layer bound leaves two layers of one
// capacity indistinguishable), with t only when its Decision tells when
// the next unit comes back.
//
// How each algorithm maps to the draft's quota q and window w:
//
//   - FixedWindow, SlidingWindow, SlidingLog: q = Limit, w = Window.
//   - TokenBucket (no window of its own): q = Burst and w = the time an
//     empty bucket takes to refill Burst, Burst × interval; so q per w is
//     the sustained rate, and a full bucket admits q at once.
//   - LeakyBucket: q = Capacity+1 (one starts at once, Capacity wait), w =
//     q × the interval, the time the queue takes to drain.
//
// w is in whole seconds, rounded up, at least 1. Capacities beyond the 15
// digits of an RFC 9651 Integer are written as 999,999,999,999,999.
//
// Config.Headers also offers the de-facto X-RateLimit-Limit, -Remaining
// and -Reset, which describe the binding layer only: its capacity, its
// remaining, and the time until every layer is full again (on an
// admission and on a 403; on a 429, Retry-After's wait), as seconds or,
// with Config.Reset, a Unix time. They go on every limited response.
//
// # Cost
//
// A Group's Cost prices each of its requests alike; its CostFunc prices
// each request, for work that varies: an earlier middleware that computes
// a GraphQL query's complexity stores it with WithCost, and
// CostFromContext reads it back. The price is what the request costs in
// its group's limit; the global layer charges Config.GlobalCost for every
// request whatever its price. A cost of 0 is free in the group's limit
// (with a global layer it still costs GlobalCost there), a CostFunc's
// price above the limit's capacity can never pass (403, above; New
// refuses a fixed Cost or GlobalCost above its limit's capacity, which
// would refuse every request), and a CostFunc that fails or returns a
// negative cost refuses the request with 400 (OutcomeCostInvalid): what
// cannot be priced is not let through.
//
// # Operations
//
// Config.DryRun decides and counts every request (consuming quota) but
// lets all through at once without headers, to dark-launch a limit: not
// even a missing key, a failing backend or a LeakyBucket's Delay holds a
// request back. Config.Hook sees every decision: route group, an identity
// hash and kind (never the identity), algorithm, Config.PolicyVersion, the
// admission.Outcome (OutcomeDenied for a 429, OutcomeDeniedNever for a 403)
// and the Decision. DenialLogger is a ready hook that logs each
// denial through log/slog, limiting its own output; otellimit's is one
// that exports to OpenTelemetry.
// Middleware.Counts returns per-group counts by admission.Outcome (one atomic add
// per request), which promlimit exports to Prometheus.
//
// When the backend cannot decide (a shared store is down), the middleware
// fails closed by default and answers 503 Service Unavailable;
// Config.FailOpen lets the request through.
//
// Middleware.Reset unblocks a client: an operator's act that returns
// every layer of an identity to a fresh state, through Backend.Reset.
//
// # Overhead
//
// An admitted request with a Bearer token, a group layer and a global
// layer, IETF headers on, runs about 12,900 instructions in the
// middleware and allocates 3 times (128 B: the key string, the RateLimit
// value and its slice): go test -bench '^BenchmarkMiddleware$' counted by
// valgrind's callgrind. Each further identity layer (Config.Identities)
// adds about 2,300: its key, its limiter decision and its RateLimit item
// (BenchmarkIdentities). Nearly half of it is SHA-256 of the token, a
// fifth the two limiter layers and their states, an eighth ServeMux
// matching, an eighth writing the fields. Over a real loopback connection
// with net/http on both ends (BenchmarkLoopback) the request costs about
// 28,600 instructions more than the bare handler, the longer header block
// written and parsed included; the bench module's RESULTS.md has the
// figures and the commands (https://github.com/hotlimit/hotlimit/blob/main/bench/RESULTS.md).
//
// # Leaky buckets
//
// A LeakyBucket admits a request with a Delay: the middleware waits it
// out (Config.Wait) before calling the handler, so the handler sees the
// shaped rate; if the client goes away meanwhile, the handler is not
// called.
package httplimit
