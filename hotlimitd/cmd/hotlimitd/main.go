// Command hotlimitd is the rate limit service Envoy asks over gRPC
// (envoy.service.ratelimit.v3.RateLimitService; see package hotlimitd for
// how it answers).
//
// With no flags it serves the built-in configuration (config.Default:
// domain "hotlimitd"; -print-config shows it) from an in-process backend,
// gRPC on :8081 and HTTP on :8080, envoyproxy/ratelimit's default ports:
//
//	go -C hotlimitd run ./cmd/hotlimitd
//
// Flags (hotlimitd -h prints them, with their defaults, and exits 0):
//
//	-config PATH          a file, or a directory of *.yaml/*.yml (default: built in)
//	-merge-domains        let several -config files hold one domain, their rules merged
//	                      (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG; config.MergeDomains)
//	-backend KIND         local (default), redis or lease
//	-redis ADDRS          host:port of Redis, or of Cluster nodes, comma-separated
//	-redis-cluster        the -redis addresses are Redis Cluster nodes
//	-redis-hash-tag TAG   every key in TAG's Cluster slot (requests of several descriptors need it on a Cluster)
//	-redis-prefix P       every Redis key starts with P instead of "hotlimit:" (envoyproxy/ratelimit's
//	                      CACHE_KEY_PREFIX): deployments of different prefixes share a Redis, not their counts
//	-redis-timeout D      how long one call to Redis may take (default 2s); see "Redis" below
//	-redis-breaker-failures N  consecutive failed calls to a Redis node that open its breaker (default 5)
//	-redis-breaker-open D how long an open breaker fails calls before one probe (default 1s)
//	-redis-local-denials N  -backend redis: keys per limit whose denial is remembered in
//	                      process, answered again without Redis until their retry time
//	                      (redislimit.WithLocalDenials; default 0: off)
//	-grpc ADDR            gRPC listen address (default :8081)
//	-http ADDR            HTTP listen address (default :8080): GET /healthcheck, /metrics
//	-reload-interval D    how often -config is polled for changes (default 1s; 0: only on SIGHUP)
//	-fail-open            answer OK when the backend cannot decide (default: gRPC Unavailable)
//	-headers              add draft-11 RateLimit-Policy and RateLimit response headers
//	-log-format F         text (default) or json, on standard error
//	-log-level L          debug, info (default), warn or error
//	-shutdown-grace D     how long in-flight RPCs may run after SIGTERM (default 10s;
//	                      0: no grace, RPCs in flight are stopped at once)
//	-print-config         print the built-in configuration and exit
//	-partition-key-secret-file F  with -headers: F's bytes key the headers' pk hash, so that
//	                      replicas behind one Envoy give a key the same pk (default: random per process)
//	-max-keys N           -backend local: the most keys each limit holds (default 1000000;
//	                      0: no bound); a new key past it evicts the entry closest to fresh
//	                      among a sample (hotlimit.WithMaxKeys)
//	-limit-headers        add envoyproxy/ratelimit's headers (its LIMIT_RESPONSE_HEADERS_ENABLED) of
//	                      the most restrictive status: RateLimit-Limit, RateLimit-Remaining and
//	                      RateLimit-Reset, or the names of -limit-header-limit, -limit-header-remaining
//	                      and -limit-header-reset (its LIMIT_LIMIT_HEADER, ...; see package hotlimitd)
//	-grpc-tls-cert F      serve gRPC over TLS only, with F's PEM certificate chain
//	-grpc-tls-key F       the PEM private key of -grpc-tls-cert (the two go together)
//	-grpc-tls-client-ca F mTLS: every client must present a certificate that chains to
//	                      a CA of F (PEM); others are refused in the handshake
//	-redis-username U     authenticate to Redis as ACL user U (AUTH U password)
//	-redis-password-file F  the Redis password is F's content (default: $HOTLIMITD_REDIS_PASSWORD)
//	-redis-sentinel M     the -redis addresses are Sentinels: decide on their master M
//	-redis-sentinel-username U, -redis-sentinel-password-file F  the Sentinels' own
//	                      credentials (default password: $HOTLIMITD_REDIS_SENTINEL_PASSWORD)
//	-redis-tls            connect to Redis (and the Sentinels) over TLS
//	-redis-tls-ca F       with -redis-tls: trust F's PEM CAs (default: the system's)
//	-redis-tls-cert F, -redis-tls-key F  with -redis-tls: a client certificate (tls-auth-clients)
//	-redis-tls-server-name N  with -redis-tls: the name the server's certificate must have
//	-xds ADDR             take the configuration from the xDS control plane at ADDR
//	                      (host:port) instead of -config; see "xDS" below
//	-xds-node-id ID       with -xds: the node the control plane sets snapshots for (default "default")
//	-xds-tls-ca F         with -xds: connect over TLS, trusting F's PEM CAs
//	-gc-heap-floor SIZE   let the heap grow SIZE bytes (GOMEMLIMIT's form: 64MiB; 0: off)
//	                      over the live heap before a collection (default 64MiB); see "Memory"
//	-grpc-stream-workers N  goroutines gRPC keeps to serve requests, each with the stack
//	                      it grew (default 64; 0: a new goroutine a request); see "Memory"
//
// A -config that is missing or cannot be read stops the command with an
// error naming -config; one that does not parse, with file:line and the
// field.
//
// # Memory
//
// The garbage collector runs, at Go's default (GOGC=100), each time the
// heap has doubled since the last collection, and at the least every
// 4 MiB. hotlimitd on Redis keeps a live heap of a few MiB and allocates
// a few KiB a request: tens of collections a second under load, each
// scanning every goroutine's stack. -gc-heap-floor sets the collector's
// percent after each collection so that the next one starts once the
// heap has grown about SIZE bytes over the live heap (or doubled, when
// the live heap is larger than SIZE: then GOGC=100's rule): at most live
// + 64 MiB of heap by default (the runtime's goal also grows by the
// goroutine stacks and globals it scanned, which the percent counts
// in). On Redis it measured 5% to 16% less CPU
// per decision (service and Redis; hotlimitd/RESULTS.md, "The garbage
// collector's floor"). When GOGC is set ("off" or a number) the floor is
// off and GOGC rules (an empty or malformed GOGC, which Go reads as 100,
// leaves the floor on); a memory limit (GOMEMLIMIT) bounds the heap
// either way.
//
// gRPC serves each request on a goroutine of its own by default, which
// starts with the smallest stack and grows it (copying it) on the way
// through gRPC's handling; -grpc-stream-workers keeps N goroutines that
// serve request after request on the stack they grew (a request that
// finds all N busy gets a goroutine of its own). Idle, each holds its
// stack, a few KiB. It measured 3% to 13% less CPU per decision on Redis.
//
// # Redis
//
// The Redis password is read from the HOTLIMITD_REDIS_PASSWORD
// environment variable, never from a flag (flags show in ps).
//
// # TLS
//
// With -grpc-tls-cert and -grpc-tls-key the gRPC port speaks TLS (1.2 or
// later) and nothing else; the HTTP port stays plain. The files are read
// again at every TLS handshake, and a change to their bytes (a rotated
// certificate written in place or renamed over, a Kubernetes Secret's
// symlink swap) is served from the next connection on, without a restart
// or a signal; connections already open keep the certificate they
// were made with. Files that do not load together (a new certificate
// whose key is not written yet, a file missing for a moment) keep the
// running certificate and CA: the error is logged once, and the files are
// tried again at the next handshake. At start, files that do not load
// stop the command with an error naming them. -grpc-tls-client-ca is read
// the same way. Where envoyproxy/ratelimit differs: it watches the
// certificate's directory (GRPC_SERVER_TLS_CERT, GRPC_SERVER_TLS_KEY,
// GRPC_CLIENT_TLS_CACERT), and its GRPC_CLIENT_TLS_SAN, a SAN the client
// certificate must have, has no equivalent here: trust is the CA's.
//
// # xDS
//
// With -xds the configuration comes from a control plane, as
// envoyproxy/ratelimit's CONFIG_TYPE=GRPC_XDS_SOTW has it (Envoy Gateway
// runs its rate limit service so): the command subscribes, over one
// Aggregated Discovery Service stream (State of the World), to the
// ratelimit.config.ratelimit.v3.RateLimitConfig resources of node
// -xds-node-id, and each response, read as the files of a directory
// are (package hotlimitd/xds; with -merge-domains several resources may
// hold one domain), replaces the whole configuration, with the
// guarantees of a reload: one that does not load, or that the backend
// refuses, is NACKed with the error, logged and counted
// (hotlimitd_config_reloads_total{result="failure"}), and the running
// configuration is kept; limits whose place and policy it keeps keep
// their state. Until the first response is applied, the configuration is
// empty (every descriptor is OK without a limit, as envoyproxy/ratelimit
// answers then), gRPC health is NOT_SERVING and /healthcheck answers 503,
// so that a load balancer that checks health waits for the limits. When
// the stream fails the running configuration stays and a new stream is
// opened after a backoff (0.5s doubling to 30s, jittered). SIGHUP has
// nothing to reload. Where envoyproxy/ratelimit differs: it ACKs a
// response before applying it, sends node metadata and extra headers
// (CONFIG_GRPC_XDS_NODE_METADATA, CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS)
// and can present a client certificate to the control plane; hotlimitd
// does none of these, and its backoff is fixed.
//
// # Redis TLS, AUTH and Sentinel
//
// Passwords are never flag values (flags show in ps): the Redis password
// is the content of -redis-password-file (less one final line end) or the
// HOTLIMITD_REDIS_PASSWORD environment variable, the Sentinels'
// -redis-sentinel-password-file or HOTLIMITD_REDIS_SENTINEL_PASSWORD; a
// file and its variable both set is an error. A password alone is
// requirepass's (the default user); with -redis-username it is that ACL
// user's. With -redis-sentinel the -redis addresses are Sentinels: the
// command decides on the master they name, and follows it when they fail
// over (Redis replicates asynchronously: a failover can lose the counts
// the old master had not replicated). -redis-tls makes every connection
// TLS, the Sentinels' too, verifying the server's certificate (against
// -redis-tls-ca, else the system's CAs); its certificate files are read
// once, at start. A Redis that refuses the credentials or the TLS
// handshake stops the command at start, as one that does not answer.
// Where envoyproxy/ratelimit differs: it takes "password" or
// "user:password" in REDIS_AUTH, a variable whose value is the secret;
// it can skip the server's hostname verification
// (REDIS_TLS_SKIP_HOSTNAME_VERIFICATION), which hotlimitd does not offer:
// -redis-tls-server-name names the certificate's host instead.
//
// # Redis timeouts and the breaker
//
// Each call to Redis (one per request, or a lease's take) has
// -redis-timeout; one that does not answer in time fails, and the
// failure policy answers (gRPC Unavailable, or OK with -fail-open).
// What a timeout means for exactness: the call is never retried, but
// Redis may have run it all the same (it was sent; Redis was slow, not
// gone), so a request that failed this way may have consumed its
// quota: a limit then admits fewer requests than it allows (and, with
// -fail-open, the requests Redis did not decide are admitted whatever
// their limits).
// The default, 2s, is well above the pauses a healthy Redis makes (a
// fork for a snapshot, a failover, another client's slow command), so
// that they cost latency, not failed requests.
//
// A breaker in front of each Redis node (redislimit.Breaker) opens after
// -redis-breaker-failures consecutive failed calls to it: a call not
// answered within -redis-timeout, or a broken or refused connection. It
// then fails every call to that node at once for -redis-breaker-open,
// and lets one probe through, whose success closes it. A call that its
// caller gave up on first (Envoy's rate limit filter has a timeout of its
// own, 20ms unless its configuration sets one) ends with its caller and
// counts for nothing: a Redis slower than Envoy waits is slow, not dead,
// and opening the breaker on it would fail the requests that come once it
// answers. So a Redis that pauses for 0.3s fails no request once it
// answers again, and none that was waiting for it (TestRedisPause). A
// hung Redis opens the breaker once calls have waited -redis-timeout for
// it, which only callers more patient than -redis-timeout do: with every
// caller less patient, the breaker stays closed and each call costs its
// caller's timeout instead (set -redis-timeout below Envoy's timeout to
// have a hung Redis fail fast, at the price of failing on pauses).
//
// The gRPC port also serves grpc.health.v1.Health, for the whole server
// ("") and for envoy.service.ratelimit.v3.RateLimitService: SERVING once
// started, NOT_SERVING from the moment shutdown begins (a Watch stream of
// either ends once it has told NOT_SERVING, and a Watch of any other
// service name, told SERVICE_UNKNOWN, ends when shutdown begins, so that
// watchers do not hold the graceful stop). GET /healthcheck
// answers 200 "OK" then, 503 after. /metrics has the Prometheus metrics:
// hotlimitd_requests_total{code}, hotlimitd_shadow_over_limit_total,
// hotlimitd_shadow_errors_total, hotlimitd_config_reloads_total{result},
// hotlimitd_config_last_reload_success_timestamp_seconds,
// hotlimitd_config_last_reload_successful, promlimit's
// hotlimit_backend_duration_seconds and hotlimit_backend_remaining, and
// the Go runtime's. promlimit's series are labelled by limit; a reload
// deletes the series of the limits it dropped (a changed policy is a new
// limit name), so that config churn does not grow /metrics: a request
// decided under the old configuration and recorded after the reload can
// bring a dropped limit's series back, until the next reload.
//
// OpenTelemetry is off by default. When the standard variables configure
// an OTLP exporter (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_METRICS_ENDPOINT; OTEL_SDK_DISABLED=true or
// OTEL_METRICS_EXPORTER=none turn it off), the command also records
// otellimit's metrics (hotlimit.backend.duration, hotlimit.backend.remaining)
// and exports them over OTLP/gRPC (OTEL_EXPORTER_OTLP_PROTOCOL, if set,
// must be grpc) every OTEL_METRIC_EXPORT_INTERVAL, and once more at
// shutdown. An endpoint variable the exporter could not use (not a URL,
// such as 127.0.0.1:4317 without http://, or an http(s) URL without a
// host) stops the command at start with an error naming it. A last
// export that fails at shutdown (the collector is down) is logged as a
// warning and does not fail the shutdown: the command still exits 0.
// Traces go the same way and on their own: with
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set
// (OTEL_TRACES_EXPORTER=none turns them off), each ShouldRateLimit is a
// span (see package hotlimitd: the domain, the number of descriptors and
// the overall code, child of the caller's W3C traceparent), sampled as
// OTEL_TRACES_SAMPLER says (by default, always, or as the parent was),
// batched (OTEL_BSP_*) and flushed at shutdown.
//
// SIGHUP reloads -config (as the poll does); a configuration that fails
// to load, or that the backend refuses, is logged and counted, and the
// running one is kept. SIGTERM or SIGINT shuts down gracefully: health
// NOT_SERVING, gRPC GracefulStop for at most -shutdown-grace, then Stop
// (with -shutdown-grace 0, Stop at once: no grace), then the HTTP server
// and the backend are closed. RPCs still in flight when Stop ends them
// are logged, with their number, as having outlived -shutdown-grace;
// nothing is logged when none were.
//
// Logs are structured (log/slog) and hold limit names, domains, counts
// and errors: never a key or a descriptor's value. The Redis client's own
// messages (go-redis's: connections that failed) go there too, at the
// debug level, and OpenTelemetry's errors (an export that failed) at the
// warning level.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr, sigs, nil); err != nil {
		fmt.Fprintln(os.Stderr, "hotlimitd:", err)
		os.Exit(1)
	}
}
