// Package otellimit exports what hotlimit limiters, an httplimit
// middleware and a grpclimit interceptor do through OpenTelemetry:
// metrics through a MeterProvider and traces through a TracerProvider
// that the application passes in. It lives in a nested module, so that
// the root module does not depend on OpenTelemetry.
//
//	reg, err := otellimit.ObserveLimiters(mp, map[string]*hotlimit.Limiter{"jobs": jobs})
//	defer reg.Unregister()
//
//	obs, err := otellimit.New(otellimit.Options{MeterProvider: mp, TracerProvider: tp})
//	mw, err := httplimit.New(httplimit.Config{
//		...
//		Hook:      obs.Hook,                                // counts every request
//		Observers: []admission.Observer{obs},               // times and traces every decision
//	})
//	reg, err := otellimit.ObserveMiddleware(mp, mw)         // the Local backend's limiters
//
// The same Observer, as a grpclimit interceptor's Config.Hook and one of
// its Config.Observers, counts its calls and times its decisions: Hook
// tells a request from a call by the Event's Transport.
//
// # Instruments
//
// Names follow OpenTelemetry's conventions: dotted lower-case names in the
// hotlimit namespace, no _total suffix, units in UCUM. The meter and the
// tracer are named "github.com/hotlimit/hotlimit/otellimit".
//
// Read from each limiter's Stats when the reader collects (nothing on the
// decision path), attribute hotlimit.limit:
//
//	hotlimit.limiter.decisions  Int64ObservableCounter  {decision}  + hotlimit.decision
//	hotlimit.limiter.refunds    Int64ObservableCounter  {decision}  admissions given back
//	hotlimit.limiter.keys       Int64ObservableUpDownCounter {key}  keys held now
//	hotlimit.limiter.swept      Int64ObservableCounter  {key}       fresh keys removed
//	hotlimit.limiter.evicted    Int64ObservableCounter  {key}       non-fresh keys evicted
//	hotlimit.limiter.memory.usage Int64ObservableUpDownCounter By   heap bytes held (MemStats)
//
// hotlimit.Stats says exactly what each counts; the counters never
// decrease. An admission given back later stays counted as allowed and
// adds one to hotlimit.limiter.refunds, so the admissions that stood are
// decisions{hotlimit.decision=allowed} − refunds.
//
// Recorded by Observer.Hook, once per request the middleware sees (an
// Event whose Transport is "http", or "" for one built by hand):
//
//	hotlimit.http.requests  Int64Counter  {request}  hotlimit.route_group, hotlimit.outcome,
//	                                                 hotlimit.algorithm, hotlimit.identity.kind,
//	                                                 hotlimit.tenant (with Options.Tenant)
//
// The share of 429s of a route group is requests{hotlimit.outcome=denied
// or key_denied} / requests, by hotlimit.route_group.
//
// Recorded by Observer.Hook, once per call a grpclimit interceptor decides
// (an Event whose Transport is "grpc"):
//
//	hotlimit.grpc.calls  Int64Counter  {call}  hotlimit.method_group, hotlimit.outcome,
//	                                           hotlimit.algorithm, hotlimit.identity.kind
//
// The share of refused calls of a method group is calls{hotlimit.outcome=
// denied, denied_never, key_denied or error_denied} / calls, by
// hotlimit.method_group.
//
// Recorded by Observer.Observe, an admission.Observer handed to the
// middleware (httplimit.Config.Observers) or the interceptor
// (grpclimit.Config.Observers), once per decision the backend makes
// (exempt requests and key failures never reach it):
//
//	hotlimit.backend.duration  Float64Histogram  s   hotlimit.limit, hotlimit.algorithm,
//	                                                 hotlimit.backend.result, error.type
//	hotlimit.backend.remaining Int64Histogram    {unit}  hotlimit.limit, hotlimit.algorithm
//
// backend.duration is the limiter's own latency, a Redis round trip
// included for redislimit's backend; backend.remaining is the binding
// layer's Decision.Remaining after each decision that was made (not for
// errors), the distribution of capacity left.
//
// # Attributes
//
// Every attribute value comes from a set that the configuration bounds;
// none is ever a key, an identity, a token or a path:
//
//	hotlimit.limit            a limit's name: a key of httplimit.Config.Limits or of the
//	                          map given to ObserveLimiters
//	hotlimit.decision         "allowed" or "denied"
//	hotlimit.route_group      a group name of httplimit.Config.Groups
//	hotlimit.outcome          an admission.Outcome: "allowed", "denied" (429, or
//	                          RATE_LIMIT_EXCEEDED), "denied_never" (403, or
//	                          RATE_LIMIT_NEVER), "exempt", "key_denied", "error_allowed",
//	                          "error_denied", "cost_invalid", "dry_run_denied"; a gRPC
//	                          call is never priced nor dry-run, so hotlimit.grpc.calls
//	                          has no "cost_invalid" and no "dry_run_denied"
//	hotlimit.method_group     a group name of grpclimit.Config.Groups: at most
//	                          Options.MaxGroups distinct values, then "_OTHER"
//	hotlimit.algorithm        "token_bucket", "leaky_bucket", "fixed_window",
//	                          "sliding_window", "sliding_log"; absent when no limit decided
//	hotlimit.identity.kind    the kind of identity the request was limited by: "tok"
//	                          (TokenKey), "ip" (IPKey, or the fallback to the client IP),
//	                          or a ContextKey kind (for gRPC: MetadataKey, PeerKey, a
//	                          FuncKey kind); absent when no key was extracted.
//	                          At most MaxIdentityKinds distinct kinds, then "_OTHER"
//	hotlimit.tenant           what Options.Tenant returns (a tenant or plan name, never a
//	                          credential): at most MaxTenants distinct values, then "_OTHER"
//	hotlimit.backend.result   "allowed", "denied" or "error"
//	error.type                for a backend error: "timeout" (the context's deadline),
//	                          "canceled", or "_OTHER"
//
// # Traces
//
// Observer.Hook adds an event "hotlimit.decision" to an HTTP request's
// span (the one otelhttp starts, say), when it is recording, with the
// attributes of hotlimit.http.requests and hotlimit.limit: what the
// middleware did with the request, in its trace, at no cost for requests
// that are not sampled.
//
// With Options.Spans set to SpansAll, the observer also starts a span
// "hotlimit.decide" (SpanKindInternal) around each decision
// (Observer.Begin starts it before the backend is asked, Observer.Observe
// ends it), a child of the request's span, so a trace shows how much of a
// request the limiter took; a backend that traces its own calls (a Redis client
// instrumented with OpenTelemetry) puts its round trip under it. The span
// carries hotlimit.limit, hotlimit.algorithm, hotlimit.route_group,
// hotlimit.identity.kind, hotlimit.layers (how many), and at the end
// hotlimit.backend.result, hotlimit.remaining and, for a denial,
// hotlimit.retry_after (seconds); an error sets the span's status to
// Error with error.type. It is not the default because it costs several
// times an in-process decision (10 allocations, 2.5 KB and about 10 µs per
// sampled decision, see BenchmarkObservers and the README), where the
// event costs 3 allocations and 480 B; in front of Redis a span is cheap
// beside the round trip.
//
// # gRPC and Redis
//
// grpclimit decides through the same pipeline (package admission) and
// backends, with the same keys, so an Observer observes it as it does a
// middleware (grpclimit.Config.Observers): the backend's duration and
// remaining capacity, and with SpansAll a "hotlimit.decide" span under
// the call's span (otelgrpc's). Observer.Hook, as grpclimit.Config.Hook,
// counts the calls in hotlimit.grpc.calls (it adds no event to the
// call's span).
//
// Redis turns redislimit's Hooks into metrics: each script call's round
// trip by node, the failure policy's decisions, circuit breaker changes
// and the two-tier cache's denials. See Redis for the wiring.
package otellimit
