// Package bench is a gRPC load generator for rate limit services on
// loopback, and the harness that compares hotlimitd with
// envoyproxy/ratelimit and gubernator v2 (hotlimitd/RESULTS.md has the
// figures; run.sh reproduces them).
//
// It is its own module so that gubernator's dependencies (etcd, Kubernetes
// clients, memberlist, logrus) never reach hotlimitd's users, and its own
// workspace (the go.work in its directory, outside the root's) so that
// building and testing the repository never compiles or downloads them.
// Its commands run from its directory, against the tree (the replace
// directives in its go.mod): go -C hotlimitd/internal/bench run ./cmd/rlsbench -h.
//
// Run drives a Target, one request at a time per caller, from Callers
// goroutines over a number of gRPC connections, each request naming
// Descriptors keys drawn uniformly from a key space of Keys. It records the
// latency of every request (from before the client marshals it to after it
// unmarshals the reply) in an HDR histogram (github.com/HdrHistogram/hdrhistogram-go,
// 3 significant digits, 1 µs to 10 s) and reports requests per second and
// the 50th, 99th and 99.9th percentiles.
//
// A request is one decision: hotlimitd decides all the descriptors of a
// request at once, all or nothing; gubernator decides each rate limit of a
// GetRateLimits request on its own. The targets are:
//   - RLS: envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, the
//     API hotlimitd and envoyproxy/ratelimit serve, one descriptor entry
//     per key (Config is both services' configuration);
//   - Gubernator: gubernator's V1/GetRateLimits, one RateLimitReq per key,
//     with the same limit, algorithm and behavior on each.
//
// cmd/rlsbench runs one measurement (the service in a child process, the
// load from this package) and prints it as a go test -bench line;
// run.sh runs every system in alternation and summarises with benchstat;
// smoke.sh is CI's few-second check of all of it.
package bench
