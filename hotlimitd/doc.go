// Package hotlimitd is a rate limit service that Envoy (and Istio and the
// gateways built on Envoy) asks over gRPC: it implements
// envoy.service.ratelimit.v3.RateLimitService and decides every descriptor
// of a request with hotlimit's exact algorithms, in process, on Redis or
// Redis Cluster, or on leases from Redis. The command is cmd/hotlimitd;
// the configuration, envoyproxy/ratelimit's descriptor YAML extended with
// hotlimit's algorithms and costs, is package config.
//
// # How a request is answered
//
// A gRPC server of it takes ServerOption, so that a descriptor whose
// bytes are not UTF-8 (an HTTP header's, as Envoy sends them) is decided
// on its bytes rather than refused by gRPC's protobuf codec.
//
// Server.ShouldRateLimit reads the running configuration once (Options.Config),
// so a request is decided under one configuration however often it is
// reloaded. Then:
//
//   - A request without a domain, without descriptors, or with more than
//     MaxDescriptors is refused with codes.InvalidArgument (as
//     envoyproxy/ratelimit refuses the first two).
//   - Each descriptor is matched in the request's domain (config.Config.Match,
//     envoyproxy/ratelimit's rules). A descriptor that matches no rule (an
//     unknown domain, no entries, a nil entry), or whose limit another
//     descriptor of the request replaces (config.DropReplaced), is OK with no
//     current_limit and limit_remaining 0. An unlimited rule, replaced or
//     not, is OK with no current_limit and limit_remaining 4294967295.
//   - Hits: a descriptor's own hits_addend, when it is set, else the
//     request's, whose 0 (proto3 cannot tell it from unset) counts as 1.
//     A descriptor's hits_addend is a wrapper, set or not: a set 0
//     overrides the request's and checks without consuming (Envoy sends
//     such zeros, from a hits_addend format such as %BYTES_RECEIVED%);
//     envoyproxy/ratelimit has both rules. A descriptor costs hits × its
//     rule's cost, in the limit's units, saturating at the largest int64
//     (a cost beyond the limit's capacity is refused, never wrapped
//     around). A descriptor with is_negative_hits is not a give-back
//     here: it costs 0, as one of 0 hits does, so it reads its limit's
//     state without consuming: it is OK even on a spent limit (but not,
//     unless its hits are 0, on a rule that refuses every hit, below).
//   - A descriptor with its own limit (RateLimitDescriptor.limit, set by
//     Envoy's rate limit action's limit override) in a domain the
//     configuration has is decided under that limit in place of the rule
//     it matches, or of none, as envoyproxy/ratelimit does: a fixed
//     window of requests_per_unit per unit (config.Override; 0 refuses
//     every hit), enforced even where the rule is unlimited or shadow,
//     cost 1 a hit, reported as current_limit without a name, and never
//     replaced nor replacing. In an unknown domain it has no limit; a
//     unit that is not SECOND to WEEK (7, as the response counts units)
//     refuses the request with codes.InvalidArgument (envoyproxy/ratelimit
//     fails it too). Its state is kept per domain and override (each
//     requests_per_unit and unit is a limit of its own) and per
//     descriptor, keyed by every entry's key and value
//     (config.OverrideKey), across reloads. Unlike envoyproxy/ratelimit,
//     whose Redis key is the descriptor and the window whatever the
//     limit, an override does not share the count of the configured
//     rule, nor of an override with another requests_per_unit: a limit
//     is one policy's state, and a client whose override changes gets
//     the new limit afresh rather than a count kept under another. The
//     backend must be a LimitAdder (hotlimitd/backend's Store, which
//     holds up to backend.MaxAdded such limits): otherwise, or past that
//     bound, the request fails as one the backend cannot decide.
//   - Every enforced descriptor (a limit, not shadow) is decided at once, in
//     one Backend.AllowStates call, all or nothing: the request is admitted
//     only if every one of them admits it, and a refused request consumes
//     nothing in any of them. Descriptors that share a limit and a key are
//     one limit, for the sum of their costs (hotlimit.AllowLayers): they
//     get the same status, and all of them are OVER_LIMIT when the sum is
//     refused.
//   - A rule with requests_per_unit 0 refuses every hit, and so does a
//     descriptor whose key (its entries' values, length-prefixed) is
//     longer than hotlimit.MaxKeyLen, which no limiter keeps state for:
//     its descriptor is OVER_LIMIT without the backend, with no
//     duration_until_reset, and the other enforced descriptors
//     are only read (cost 0) for their statuses. Such a request is
//     refused even when the backend cannot read them: their statuses are
//     then OK, with limit_remaining 0 and no duration_until_reset, and
//     it has no Retry-After (it never passes). A descriptor whose own
//     hits_addend is 0 on such a rule is OK, with limit_remaining 0 and
//     no duration_until_reset, as envoyproxy/ratelimit answers it (0 hits
//     are not over a limit of 0), and so refuses nothing; in shadow mode
//     it is no would-be refusal either (Stats.ShadowOverLimit).
//   - The overall code is OVER_LIMIT when the request was refused, and a
//     descriptor is OVER_LIMIT when the request was refused and its own
//     limit has fewer units left than it costs, or is the limit the
//     backend names as binding; the overall code is OVER_LIMIT exactly when
//     some descriptor is.
//   - Every status of a decided descriptor comes from that decision's
//     hotlimit.LayerState (the Backend contract's states), never from a second reading: current_limit is
//     the rule's requests_per_unit, unit and rate_limit name
//     (config.Limit.RuleName, "" when it has none, as envoyproxy/ratelimit
//     answers; hotlimit's limit name, config.Limit.Name, names the limit
//     in headers and metrics only); limit_remaining
//     is its Decision.Remaining (in the limit's units, clamped to a uint32);
//     duration_until_reset is its Next, the time until the limit
//     admits one unit more (for a fixed window, the time to the window's
//     end; 0 when the limit is full), left out when the backend cannot
//     tell.
//   - A shadow-mode descriptor never refuses: it is decided on its own,
//     after the enforced ones, for its cost when the request was admitted
//     and for 0 (read only) when it was refused (a refused request does not
//     reach the service). It is reported OK with its limit's state; a
//     would-be refusal is counted in Stats.ShadowOverLimit. A backend error
//     on it answers OK without a limit (Stats.ShadowErrors).
//   - When the backend cannot decide the enforced descriptors, the RPC
//     fails with codes.Unavailable (Envoy's failure_mode_deny then
//     decides), or, with Options.FailOpen, every descriptor is OK without a
//     limit. The backend consumed nothing, as far as it knows: a call to
//     Redis that timed out after it was sent may have run there all the
//     same, and consumed (it is never retried; see backend's Timeout and
//     cmd/hotlimitd's -redis-timeout).
//   - With Options.Headers, a response that has enforced descriptors
//     carries, in response_headers_to_add, the draft-11 fields
//     RateLimit-Policy (one item per enforced descriptor, named after its
//     limit: the item httplimit writes for the policy it was decided
//     under) and RateLimit (its r and t from the decision's LayerState,
//     as httplimit writes them), and Retry-After on a refusal that can pass
//     later. Each item has a pk parameter, the draft's partition key:
//     one limit holds a quota per key, and two descriptors of one key-only
//     rule with different values (user=a, user=b) are two items of the
//     same name, told apart by their pk only (a client that keeps one item
//     per name keeps one of them); the RateLimit item and the
//     RateLimit-Policy item of a descriptor have the same pk. pk is 8
//     bytes of SHA-256 over a secret (Options.PartitionKeySecret, or one
//     drawn at random per Server) and the descriptor's values, so it
//     holds no descriptor value, and a client can neither compute it nor
//     test a guessed value against it; it can compare it: one key of a
//     limit has one pk for as long as the secret stays, and two keys of a
//     response have different ones (but for a 2⁻⁶⁴ chance).
//   - With Options.LimitHeaders, a response also carries
//     envoyproxy/ratelimit's headers (its LIMIT_RESPONSE_HEADERS_ENABLED,
//     under its names, RateLimit-Limit, RateLimit-Remaining and
//     RateLimit-Reset, or those LimitHeaders gives) of the one status it
//     picks: the last OVER_LIMIT status, else the first with the least
//     limit_remaining among the statuses with a current_limit (shadow
//     ones too); none when no status has one. Their values are that
//     status's: requests_per_unit, limit_remaining and
//     duration_until_reset in seconds, rounded up. Unlike
//     envoyproxy/ratelimit, whose Reset is always the time to the end of
//     the unit's calendar window and whose refused statuses say 0 left,
//     Reset is when the limit admits one unit more, as the decision
//     says (for every algorithm, not only the fixed window; 0 when the
//     limit is full), left out when the backend cannot tell, and
//     Remaining is what the limit has left (a descriptor refused for a
//     cost beyond it can have some).
//
// # Traces
//
// With Options.Tracer, each ShouldRateLimit is an OpenTelemetry server
// span, envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit,
// child of the trace context the request's gRPC metadata carries
// (Options.Propagator; W3C traceparent by default, which Envoy sends
// when it traces), with attributes hotlimitd.domain,
// hotlimitd.descriptors (their number) and hotlimitd.overall_code; an
// RPC that fails has the error status and rpc.grpc.status_code. Like
// every log and metric of hotlimitd, a span holds no descriptor value.
// Without a Tracer, ShouldRateLimit starts no span and reads no
// metadata. envoyproxy/ratelimit's spans (its TRACING_ENABLED) are per
// request too, named otherwise.
//
// No input panics: the fuzz target FuzzShouldRateLimit checks every
// answer against a model of the limits.
//
// # Cost
//
// In process, an admitted request of up to four descriptors allocates
// twice: one string holding every key, and one block holding the
// response, sized for its statuses; with Options.Headers, twice more:
// one string holding the fields' text and one block holding them
// (TestAllocs). BenchmarkShouldRateLimit measures it.
//
// Observers (Options.Observers) see one admission.Event per request that
// asks the backend, once it is answered (one too for a request decided
// again after a reload): its outcome (OutcomeDeniedNever when a rule that
// refuses every hit refused it), the Decision, the backend's latency, the
// binding descriptor's limit in Event.Limit and the domain in Event.Group;
// no key and no descriptor value. promlimit.BackendMetrics and
// otellimit.Observer are such observers.
package hotlimitd
