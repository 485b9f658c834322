// Package hotlimit is a keyed rate limiter for hot paths: it decides, per
// API token, user, tenant, client IP or route group, whether a request may
// proceed, in tens of nanoseconds and without allocating. A start:
//
//	lim, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 20}) // err: a bad policy, named
//	defer lim.Close()
//	d := lim.Allow(apiToken) // d.Allowed; when denied, d.RetryAfter is the exact wait
//
// A decision on an existing key is one compare-and-swap on the key's 64-bit
// state word, so any number of goroutines on one key never admit more than
// the policy allows. docs/semantics.md defines every Decision field exactly,
// per algorithm.
//
// # Which type for which job
//
//   - [Limiter], made by [New] from one [Policy]: a rate per key.
//     [TokenBucket] is the default (bursts up to Burst, then Rate);
//     [LeakyBucket] shapes, admitting with a [Decision.Delay] instead of
//     bursting; [FixedWindow] counts per aligned window ("N per calendar
//     minute"); [SlidingWindow] weighs the previous window to avoid the
//     fixed window's edge burst; [SlidingLog] is exact over every interval,
//     for small limits. [Limiter.AllowN] charges a cost, [Limiter.Check]
//     looks without charging, [Limiter.Wait] blocks until admitted,
//     [Limiter.AdmitN] records an admission that [Admission.Refund] gives back
//     when its work did not happen.
//   - [ConcurrencyLimiter], made by [NewConcurrency]: at most n operations
//     in flight per key, released through a [Permit].
//   - [Classes], made by [NewClasses]: one policy per key class (free and
//     paid plans), one Limiter each.
//   - [AllowLayers] with [Layer]: several limits (per token, per IP,
//     global) checked all or nothing.
//   - [Clock]: the default is monotonic; [ManualClock] drives time in tests;
//     [WithCoarseClock] trades a bounded lag for a cheaper clock read.
//   - [Stats] and [MemStats]: counters that only grow, and the heap bytes a
//     Limiter holds; options such as [WithMaxKeys] and [WithDenyHook] bound
//     memory and observe denials.
//
// # Where the internals start
//
// Read shard.go first: the keyed table (a power-of-two array of shards, each
// an open-addressing table of 32-byte slots) and its numbered protocol for
// lock-free decisions beside inserts and removals. Then gc.go: how the
// sweeper and eviction remove a key without racing a decision (tombstones).
// Then window.go: the packed state words of both windows, and who writes a
// word and why none moves a window backwards. bucket.go holds the token and
// leaky buckets (GCRA), decide.go the decision every algorithm shares.
//
// # Modules
//
// This module (github.com/hotlimit/hotlimit) depends only on
// github.com/cespare/xxhash/v2 and the standard library. It holds, besides
// this package:
//
//   - admission: the decision pipeline that every transport shares (keys,
//     groups, layers, backends, outcomes);
//   - httplimit: net/http middleware (route groups, layers, client IPs,
//     the IETF RateLimit headers);
//   - httpretry: an http.RoundTripper that retries politely on 429 and 503;
//   - expvarlimit: a Limiter's Stats through expvar.
//
// Everything that needs another dependency is a nested module of its own,
// so its dependencies reach only those who import it; each release tags
// every module at the same version (docs/modules.md):
//
//   - github.com/hotlimit/hotlimit/grpclimit: gRPC server interceptors;
//   - github.com/hotlimit/hotlimit/promlimit: Prometheus collectors;
//   - github.com/hotlimit/hotlimit/otellimit: OpenTelemetry metrics and spans;
//   - github.com/hotlimit/hotlimit/redislimit: every policy on Redis,
//     shared across instances, and its lease mode, which spends a budget
//     leased from Redis at in-process speed;
//   - github.com/hotlimit/hotlimit/hotlimitd: a rate limit service that
//     Envoy and its gateways ask over gRPC, on any of the backends above;
//   - github.com/hotlimit/hotlimit/linearize: linearizability checks of the
//     limiters with porcupine;
//   - github.com/hotlimit/hotlimit/cmd/ratelab: what each algorithm admits
//     on typical traffic shapes, as a table and charts;
//   - github.com/hotlimit/hotlimit/examples/routers: httplimit behind chi,
//     gin and echo;
//   - github.com/hotlimit/hotlimit/bench and
//     github.com/hotlimit/hotlimit/bench/redisbench: benchmarks against
//     other limiters;
//   - github.com/hotlimit/hotlimit/hotlimitd/internal/bench: hotlimitd against
//     gubernator, a gRPC load generator on loopback;
//   - github.com/hotlimit/hotlimit/internal/redistest: the private Redis
//     servers and clients that the tests of redislimit, hotlimitd and
//     bench/redisbench run against (test-only).
package hotlimit
