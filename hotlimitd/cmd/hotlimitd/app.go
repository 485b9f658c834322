package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/defaults"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/heapfloor"
	"github.com/hotlimit/hotlimit/hotlimitd/xds"
	"github.com/hotlimit/hotlimit/promlimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// flags are the command's settings.
type flags struct {
	config         string
	backend        string
	redis          string
	redisCluster   bool
	redisHashTag   string
	redisPrefix    string
	grpcAddr       string
	httpAddr       string
	reloadInterval time.Duration
	failOpen       bool
	headers        bool
	logFormat      string
	logLevel       string
	shutdownGrace  time.Duration
	printConfig    bool
	maxKeys        int
	pkSecretFile   string
	grpcTLSCert    string
	grpcTLSKey     string
	grpcTLSCA      string
	limitHeaders   bool
	mergeDomains   bool
	limitHeader    hotlimitd.LimitHeaders // -limit-header-* names
	redisSec       redisSecurity
	redisTimeout   time.Duration
	breakFailures  int
	breakOpen      time.Duration
	localDenials   int
	xds            string // the control plane's address
	xdsNodeID      string
	xdsTLSCA       string
	gcHeapFloor    heapfloor.Size
	streamWorkers  int
}

// redisSecurity are the flags that secure the connection to Redis: TLS,
// AUTH and Sentinel.
type redisSecurity struct {
	username, passwordFile         string
	sentinel                       string // the master's name
	sentinelUser, sentinelPassFile string
	tls                            bool
	tlsCA, tlsCert, tlsKey         string
	tlsServerName                  string
}

// parseFlags parses args. -h or -help prints the usage to stdout and
// returns flag.ErrHelp; a bad flag is an error, after the usage on
// stderr.
func parseFlags(args []string, stdout, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := newFlagSet(f)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs) // asked for: the output, and no error
		} else {
			usage(stderr, fs) // after flag's message, which names the flag
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if f.grpcAddr == "" || f.httpAddr == "" {
		return nil, errors.New("-grpc and -http need an address (host:port; :0 for any free port)")
	}
	if (f.grpcTLSCert == "") != (f.grpcTLSKey == "") {
		return nil, errors.New("-grpc-tls-cert and -grpc-tls-key go together")
	}
	if f.grpcTLSCA != "" && f.grpcTLSCert == "" {
		return nil, errors.New("-grpc-tls-client-ca needs -grpc-tls-cert and -grpc-tls-key (mTLS is TLS)")
	}
	if err := checkLimitHeaders(fs, f); err != nil {
		return nil, err
	}
	if f.xds != "" && f.config != "" {
		return nil, errors.New("-xds and -config exclude each other: the configuration comes from one of them")
	}
	if f.xds == "" && f.xdsTLSCA != "" {
		return nil, errors.New("-xds-tls-ca needs -xds")
	}
	if err := defaults.CheckStreamWorkers(f.streamWorkers); err != nil {
		return nil, err
	}
	if f.reloadInterval < 0 || f.shutdownGrace < 0 {
		return nil, errors.New("-reload-interval and -shutdown-grace must not be negative")
	}
	return f, nil
}

// startHeapFloor starts -gc-heap-floor, unless it is 0 or GOGC is set
// to a value the runtime reads (the user's own choice of collector), and
// returns what stops it. The floor is the process's: in a process that
// runs the command twice at once (tests), the second run has none of its
// own.
func startHeapFloor(f *flags, log *slog.Logger) (stop func()) {
	if f.gcHeapFloor == 0 {
		return func() {}
	}
	if v, ok := heapfloor.UserGOGC(); ok {
		log.Info("-gc-heap-floor is off: GOGC is set", "gogc", v)
		return func() {}
	}
	stop, _ = heapfloor.Start(uint64(f.gcHeapFloor))
	return stop
}

// newFlagSet returns the command's flags, bound to f's fields.
func newFlagSet(f *flags) *flag.FlagSet {
	fs := flag.NewFlagSet("hotlimitd", flag.ContinueOnError)
	fs.Usage = func() {} // parseFlags prints it, where it belongs
	fs.StringVar(&f.config, "config", "", "configuration `path`: a file, or a directory of *.yaml/*.yml (default: built in)")
	fs.StringVar(&f.backend, "backend", "local", "backend: local, redis or lease")
	fs.StringVar(&f.redis, "redis", "", "Redis `host:port`, or Redis Cluster nodes, comma-separated")
	fs.BoolVar(&f.redisCluster, "redis-cluster", false, "the -redis addresses are Redis Cluster nodes")
	fs.StringVar(&f.redisHashTag, "redis-hash-tag", "", "put every key in the Redis Cluster slot of this `tag`, so that requests of several descriptors decide in one call")
	fs.StringVar(&f.redisPrefix, "redis-prefix", "", "start every Redis key with this `prefix` instead of \"hotlimit:\" (envoyproxy/ratelimit's CACHE_KEY_PREFIX): deployments of different prefixes share a Redis, not their counts")
	fs.StringVar(&f.grpcAddr, "grpc", ":8081", "gRPC listen `address`")
	fs.StringVar(&f.httpAddr, "http", ":8080", "HTTP listen `address` (GET /healthcheck, /metrics)")
	fs.DurationVar(&f.reloadInterval, "reload-interval", time.Second, "how often -config is polled for changes (0: only on SIGHUP)")
	fs.BoolVar(&f.failOpen, "fail-open", false, "answer OK when the backend cannot decide, instead of gRPC Unavailable")
	fs.BoolVar(&f.headers, "headers", false, "add draft-11 RateLimit-Policy and RateLimit response headers")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "how long in-flight RPCs may run after SIGTERM (0: no grace, they are stopped at once)")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the built-in configuration and exit")
	fs.StringVar(&f.pkSecretFile, "partition-key-secret-file", "", "with -headers: a `file` whose bytes key the headers' pk hash, the same in every replica behind one Envoy (default: a random secret per process)")
	fs.DurationVar(&f.redisTimeout, "redis-timeout", defaultRedisTimeout, "-backend redis or lease: how long one call to Redis may take before it fails (the failure policy answers, and the breaker counts it). A call that timed out may still have consumed quota: Redis may have run it")
	fs.IntVar(&f.breakFailures, "redis-breaker-failures", defaultBreakerFailures, "-backend redis or lease: how many consecutive failed `calls` to a Redis node (not answered within -redis-timeout, or a broken or refused connection) open its breaker, which then fails calls to it at once. A call its caller gave up on first (Envoy's timeout) does not count")
	fs.DurationVar(&f.breakOpen, "redis-breaker-open", defaultBreakerOpen, "-backend redis or lease: how long an open breaker fails calls before it lets one probe through (its success closes it)")
	fs.IntVar(&f.localDenials, "redis-local-denials", 0, "-backend redis: how many `keys` per limit Redis refused this process remembers, to refuse the same request again until its retry time without asking Redis (redislimit.WithLocalDenials; it may refuse longer than Redis would after a give-back or a Redis restart, never admit more); 0: off")
	fs.IntVar(&f.maxKeys, "max-keys", defaultMaxKeys, "-backend local: the most `keys` each limit holds (hotlimit.WithMaxKeys: a new key past the bound evicts the entry closest to fresh among a sample); 0: no bound")
	fs.StringVar(&f.grpcTLSCert, "grpc-tls-cert", "", "serve gRPC over TLS with the PEM certificate chain in this `file` (with -grpc-tls-key; read again when it changes)")
	fs.StringVar(&f.grpcTLSKey, "grpc-tls-key", "", "the PEM private key `file` of -grpc-tls-cert")
	fs.StringVar(&f.grpcTLSCA, "grpc-tls-client-ca", "", "mTLS: require a client certificate that chains to a PEM CA of this `file` (with -grpc-tls-cert)")
	fs.BoolVar(&f.mergeDomains, "merge-domains", false, "let several -config files (or -xds resources) hold one domain, their rules merged (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG); a rule in two files is an error naming both")
	fs.BoolVar(&f.limitHeaders, "limit-headers", false, "add envoyproxy/ratelimit's response headers (its LIMIT_RESPONSE_HEADERS_ENABLED) of the most restrictive status")
	fs.StringVar(&f.limitHeader.Limit, "limit-header-limit", hotlimitd.DefaultLimitHeader, "with -limit-headers: the `name` of the header of requests_per_unit (its LIMIT_LIMIT_HEADER)")
	fs.StringVar(&f.limitHeader.Remaining, "limit-header-remaining", hotlimitd.DefaultRemainingHeader, "with -limit-headers: the `name` of the header of limit_remaining (its LIMIT_REMAINING_HEADER)")
	fs.StringVar(&f.limitHeader.Reset, "limit-header-reset", hotlimitd.DefaultResetHeader, "with -limit-headers: the `name` of the header of duration_until_reset, in seconds (its LIMIT_RESET_HEADER)")
	rs := &f.redisSec
	fs.StringVar(&rs.username, "redis-username", "", "authenticate to Redis as this ACL `user` (the password: -redis-password-file or $HOTLIMITD_REDIS_PASSWORD)")
	fs.StringVar(&rs.passwordFile, "redis-password-file", "", "a `file` holding the Redis password (instead of $HOTLIMITD_REDIS_PASSWORD)")
	fs.StringVar(&rs.sentinel, "redis-sentinel", "", "the -redis addresses are Redis Sentinels: decide on the master they name `master`, and follow its failovers")
	fs.StringVar(&rs.sentinelUser, "redis-sentinel-username", "", "authenticate to the Sentinels as this ACL `user`")
	fs.StringVar(&rs.sentinelPassFile, "redis-sentinel-password-file", "", "a `file` holding the Sentinels' own password (instead of $HOTLIMITD_REDIS_SENTINEL_PASSWORD)")
	fs.BoolVar(&rs.tls, "redis-tls", false, "connect to Redis (and the Sentinels) over TLS, verifying the server's certificate")
	fs.StringVar(&rs.tlsCA, "redis-tls-ca", "", "with -redis-tls: trust the PEM CAs of this `file` (default: the system's)")
	fs.StringVar(&rs.tlsCert, "redis-tls-cert", "", "with -redis-tls: present the PEM client certificate of this `file` (with -redis-tls-key), for tls-auth-clients")
	fs.StringVar(&rs.tlsKey, "redis-tls-key", "", "the PEM private key `file` of -redis-tls-cert")
	fs.StringVar(&rs.tlsServerName, "redis-tls-server-name", "", "with -redis-tls: the `name` the server's certificate must have (default: the host of each address)")
	fs.StringVar(&f.xds, "xds", "", "take the configuration from this xDS control plane (`host:port`; RateLimitConfig resources over ADS, State of the World) instead of -config")
	fs.StringVar(&f.xdsNodeID, "xds-node-id", "default", "with -xds: the node `id` the control plane sets the snapshot for")
	fs.StringVar(&f.xdsTLSCA, "xds-tls-ca", "", "with -xds: connect over TLS, trusting the PEM CAs of this `file`")
	fs.IntVar(&f.streamWorkers, "grpc-stream-workers", defaults.StreamWorkers, "how many `goroutines` gRPC keeps to serve requests (grpc.NumStreamWorkers): a request finds one with the stack it grew already, instead of a new goroutine growing its own; a request that finds them all busy gets a goroutine of its own. 0: one goroutine a request")
	f.gcHeapFloor = heapfloor.Default
	fs.Var(&f.gcHeapFloor, "gc-heap-floor", "let the heap grow this many `bytes` (GOMEMLIMIT's form: 64MiB, 0 for off) over the live heap before the garbage collector runs, instead of GOGC=100's double: a small live heap is collected less often. Off when GOGC is set; a GOMEMLIMIT still bounds the heap")
	return fs
}

// usage prints the command's usage to w: what it is, then every flag
// with its default.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: hotlimitd [flags]

hotlimitd is the rate limit service Envoy asks over gRPC
(envoy.service.ratelimit.v3.RateLimitService). With no flags it serves
the built-in configuration (-print-config shows it) from an in-process
backend, gRPC on :8081 and HTTP on :8080. SIGHUP reloads -config;
SIGTERM or SIGINT shut down gracefully. A duration is a number with
its unit: 300ms, 1s, 2m.

Flags:
`)
	fs.VisitAll(func(fl *flag.Flag) {
		kind, text := flag.UnquoteUsage(fl)
		if kind != "" {
			kind = " " + kind
		}
		fmt.Fprintf(w, "  -%s%s\n    \t%s", fl.Name, kind, text)
		if !strings.Contains(text, "(default") {
			def := fl.DefValue
			if g, ok := fl.Value.(flag.Getter); ok {
				if _, isString := g.Get().(string); isString {
					def = strconv.Quote(def)
				}
			}
			fmt.Fprintf(w, " (default %s)", def)
		}
		fmt.Fprintln(w)
	})
}

func newLogger(f *flags, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", f.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("-log-format %q: want text or json", f.logFormat)
}

// hooks let tests reach into a running command.
type hooks struct {
	started func(*app)                                // called once serving
	backend func(admission.Backend) admission.Backend // wraps the backend the server asks
	handled func(os.Signal)                           // called after a SIGHUP was handled
	loaded  func(error)                               // called after each reload, applied (nil) or refused
}

// app is a running hotlimitd.
type app struct {
	f           *flags
	log         *slog.Logger
	cur         atomic.Pointer[config.Config] // the configuration requests are decided under
	watcher     *config.Watcher               // nil without -config
	xds         *xds.Client                   // nil without -xds
	xdsConn     *grpc.ClientConn              // xds's connection
	xdsReady    atomic.Bool                   // with -xds: a configuration came from the control plane
	store       store
	srv         *hotlimitd.Server
	grpc        *grpc.Server
	inflight    atomic.Int64 // RPCs being handled (health watches too)
	health      *health.Server
	stopping    chan struct{} // closed when shutdown begins: health watches end
	http        *http.Server
	ready       atomic.Bool // /healthcheck answers 200
	reg         *prometheus.Registry
	metrics     *reloadMetrics
	bm          *promlimit.BackendMetrics
	stopOTel    func(context.Context) error // flushes and stops the OpenTelemetry export; nil without one
	stopTracing func(context.Context) error // flushes and stops the span export; nil without one
	loaded      func(error)                 // hooks.loaded

	grpcLis, httpLis net.Listener
	reloadMu         sync.Mutex // one reload applies at a time
}

// run is the command: it serves until ctx is done or a SIGTERM or SIGINT
// arrives on sigs, and reloads on SIGHUP.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, sigs <-chan os.Signal, h *hooks) error {
	f, err := parseFlags(args, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil // -h: the usage was asked for
	}
	if err != nil {
		return err
	}
	if f.printConfig {
		_, err := stdout.Write(config.DefaultYAML())
		return err
	}
	log, err := newLogger(f, stderr)
	if err != nil {
		return err
	}
	redis.SetLogger(redisLogger{log})
	defer startHeapFloor(f, log)()
	// OpenTelemetry's errors (an export that failed) in the log too, not
	// as the plain lines its default handler prints.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("OpenTelemetry", "err", err.Error()) }))
	if h == nil {
		h = &hooks{}
	}
	a, err := start(ctx, f, log, h)
	if err != nil {
		return err
	}
	if h.started != nil {
		h.started(a)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watching := make(chan struct{})
	switch {
	case a.watcher != nil && f.reloadInterval > 0:
		go func() {
			defer close(watching)
			a.watcher.Run(watchCtx)
		}()
	case a.xds != nil:
		go func() {
			defer close(watching)
			a.xds.Run(watchCtx)
		}()
	default:
		close(watching)
	}
	errs := make(chan error, 2)
	go func() { errs <- a.grpc.Serve(a.grpcLis) }()
	go func() { errs <- a.http.Serve(a.httpLis) }()
	var serveErr error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errs:
			serveErr = err
			log.Error("server failed", "err", err)
			break loop
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				a.reload()
				if h.handled != nil {
					h.handled(sig)
				}
				continue
			}
			log.Info("shutting down", "signal", sig.String())
			break loop
		}
	}
	stopWatch()
	<-watching // no reload runs on a backend being closed
	if err := a.shutdown(); err != nil && serveErr == nil {
		serveErr = err
	}
	return serveErr
}

// start loads the configuration, opens the backend, and binds the
// listeners. When it fails, it closes what it opened (abandon).
func start(ctx context.Context, f *flags, log *slog.Logger, h *hooks) (_ *app, err error) {
	a := &app{f: f, log: log, reg: prometheus.NewRegistry(), loaded: h.loaded}
	a.metrics = newReloadMetrics(a.reg)
	cfg, err := a.loadConfig()
	if err != nil {
		return nil, err
	}
	a.cur.Store(cfg)
	a.metrics.success(time.Now())
	defer func() {
		if err != nil {
			a.abandon()
		}
	}()
	st, err := openStore(ctx, f, cfg.Limits())
	if err != nil {
		return nil, err
	}
	a.store = st
	var b admission.Backend = a.store
	if h.backend != nil {
		b = h.backend(b)
	}
	observers, tracer, err := a.startTelemetry(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.newServer(b, observers, tracer); err != nil {
		return nil, err
	}
	if err := a.newGRPC(); err != nil {
		return nil, err
	}
	if f.xds != "" {
		if err := a.startXDS(); err != nil {
			return nil, err
		}
	}
	a.http = &http.Server{Handler: a.httpHandler(), ReadHeaderTimeout: 10 * time.Second}
	if err := a.listen(); err != nil {
		return nil, err
	}
	a.ready.Store(true)
	log.Info("serving", "grpc", a.grpcLis.Addr().String(), "grpc_tls", tlsMode(f), "http", a.httpLis.Addr().String(),
		"backend", f.backend, "config", configName(f), "domains", strings.Join(cfg.Domains(), ","), "limits", len(cfg.Limits()))
	return a, nil
}

// loadConfig returns the configuration to start with: an empty one until
// the control plane sends one (-xds), the built-in one (no -config), or
// -config's, which a.watcher then reloads.
func (a *app) loadConfig() (*config.Config, error) {
	f := a.f
	switch {
	case f.xds != "":
		// Empty (every descriptor OK without a limit, health
		// NOT_SERVING) until the control plane sends one.
		return config.ParseFiles(nil)
	case f.config == "":
		return config.Default(), nil
	}
	interval := f.reloadInterval
	if interval == 0 {
		interval = time.Hour // not polled (Run is not started): SIGHUP only
	}
	var opts []config.LoadOption
	if f.mergeDomains {
		opts = append(opts, config.MergeDomains())
	}
	w, err := config.NewWatcher(f.config, interval, a.applyReload, a.reloadFailed, opts...)
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return nil, fmt.Errorf("-config %s: %w", f.config, err) // missing or unreadable
	}
	if err != nil {
		return nil, err // file:line: field: message, every one
	}
	a.watcher = w
	return w.Current(), nil
}

// startTelemetry returns the decisions' observers (the Prometheus
// metrics, and OpenTelemetry's when its environment asks for an export)
// and the tracer of the spans (nil without an export).
func (a *app) startTelemetry(ctx context.Context) ([]admission.Observer, trace.Tracer, error) {
	a.bm = promlimit.NewBackendMetrics(promlimit.BackendOptions{})
	observers := []admission.Observer{a.bm}
	otelObs, stopOTel, err := startOTel(ctx)
	if err != nil {
		return nil, nil, err
	}
	if otelObs != nil {
		a.stopOTel = stopOTel
		observers = append(observers, otelObs)
		a.log.Info("exporting OpenTelemetry metrics over OTLP/gRPC")
	}
	tracer, stopTracing, err := startTracing(ctx)
	if err != nil {
		return nil, nil, err
	}
	if tracer != nil {
		a.stopTracing = stopTracing
		a.log.Info("exporting OpenTelemetry traces over OTLP/gRPC")
	}
	return observers, tracer, nil
}

// newServer makes the rate limit service on backend b, and registers its
// metrics.
func (a *app) newServer(b admission.Backend, observers []admission.Observer, tracer trace.Tracer) error {
	f := a.f
	secret, err := readSecret(f)
	if err != nil {
		return err
	}
	opts := hotlimitd.Options{
		Tracer: tracer,
		Config: a.cur.Load, Backend: b, Headers: f.headers, FailOpen: f.failOpen,
		PartitionKeySecret: secret, Observers: observers, Logger: a.log,
	}
	if f.limitHeaders {
		opts.LimitHeaders = &f.limitHeader
	}
	if a.srv, err = hotlimitd.New(opts); err != nil {
		return err
	}
	a.reg.MustRegister(a.bm, &serverCollector{srv: a.srv}, collectors.NewGoCollector())
	return nil
}

// newGRPC makes the gRPC server (with TLS under -grpc-tls-cert) of the
// rate limit service and of health, SERVING.
func (a *app) newGRPC() error {
	f := a.f
	gopts := []grpc.ServerOption{hotlimitd.ServerOption(),
		grpc.ChainUnaryInterceptor(a.countUnary), grpc.ChainStreamInterceptor(a.countStream)}
	if f.streamWorkers > 0 {
		gopts = append(gopts, grpc.NumStreamWorkers(uint32(f.streamWorkers)))
	}
	if f.grpcTLSCert != "" {
		files, err := newTLSFiles(f.grpcTLSCert, f.grpcTLSKey, f.grpcTLSCA, a.log)
		if err != nil {
			return err
		}
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(files.serverConfig())))
	}
	a.grpc = grpc.NewServer(gopts...)
	a.srv.Register(a.grpc)
	a.health = health.NewServer()
	a.stopping = make(chan struct{})
	healthpb.RegisterHealthServer(a.grpc, &healthService{Server: a.health, stopping: a.stopping})
	a.health.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return nil
}

// httpHandler serves /healthcheck and /metrics.
func (a *app) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthcheck", func(w http.ResponseWriter, _ *http.Request) {
		if a.xds != nil && !a.xdsReady.Load() {
			http.Error(w, "no configuration from the xDS control plane yet", http.StatusServiceUnavailable)
			return
		}
		if !a.ready.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "OK")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	return mux
}

// listen binds -grpc and -http.
func (a *app) listen() error {
	var err error
	if a.grpcLis, err = net.Listen("tcp", a.f.grpcAddr); err != nil {
		return fmt.Errorf("-grpc %s: %w", a.f.grpcAddr, err)
	}
	if a.httpLis, err = net.Listen("tcp", a.f.httpAddr); err != nil {
		a.grpcLis.Close()
		return fmt.Errorf("-http %s: %w", a.f.httpAddr, err)
	}
	return nil
}

// abandon closes what a start that failed opened, the last first: the
// gRPC server (its stream workers), the xDS connection, the span and
// metric exports, the backend.
func (a *app) abandon() {
	if a.grpc != nil {
		a.grpc.Stop()
	}
	if a.xdsConn != nil {
		a.xdsConn.Close()
	}
	if a.stopTracing != nil {
		a.stopTracing(context.Background())
	}
	if a.stopOTel != nil {
		a.stopOTel(context.Background())
	}
	if a.store != nil {
		a.store.Close()
	}
}

// tlsMode names how the gRPC server is secured, for the log.
func tlsMode(f *flags) string {
	switch {
	case f.grpcTLSCA != "":
		return "mtls"
	case f.grpcTLSCert != "":
		return "tls"
	}
	return "off"
}

func configName(f *flags) string {
	switch {
	case f.xds != "":
		return "xds:" + f.xds
	case f.config == "":
		return "built-in"
	}
	return f.config
}

// reload is SIGHUP: load -config again now. Without -config there is
// nothing to reload.
func (a *app) reload() {
	if a.watcher == nil {
		a.log.Info("SIGHUP: no -config to reload")
		return
	}
	if err := a.watcher.Reload(); err != nil {
		a.reloadFailed(err) // Reload leaves it to its caller
	}
}

// applyReload is the Watcher's onReload: apply, and a failure reported.
func (a *app) applyReload(cfg *config.Config) {
	if err := a.apply(cfg); err != nil {
		a.reloadFailed(err)
		return
	}
	a.reloaded()
}

// apply makes cfg the running configuration: the backend takes the new
// limits beside the running ones, requests then see the new
// configuration, and the dropped limits go (backend.Store.Reload). A
// backend that refuses them keeps the running configuration, and apply
// returns why.
func (a *app) apply(cfg *config.Config) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if cfg == a.cur.Load() {
		return nil
	}
	// Both sets of limits decide while cfg is published: a request that
	// read either configuration finds its limits.
	limits := cfg.Limits()
	if err := a.store.Reload(limits, func() { a.cur.Store(cfg) }); err != nil {
		return fmt.Errorf("the backend refused the new limits: %w", err)
	}
	// The Prometheus series of the limits the new configuration dropped go,
	// now that requests read it: config churn must not grow /metrics. A
	// request that read the old configuration can record a dropped limit
	// once more; its series go at the next reload.
	a.bm.Retain(func(name string) bool { _, ok := limits[name]; return ok })
	a.metrics.success(time.Now())
	a.log.Info("configuration reloaded", "domains", strings.Join(cfg.Domains(), ","), "limits", len(cfg.Limits()))
	return nil
}

// reloaded tells hooks.loaded that a configuration was applied, once all
// that applying it does is done (with -xds, health SERVING too).
func (a *app) reloaded() {
	if a.loaded != nil {
		a.loaded(nil)
	}
}

// startXDS connects to the -xds control plane (the stream opens when run
// starts a.xds.Run), and holds health NOT_SERVING until the first
// configuration from it is applied.
func (a *app) startXDS() error {
	creds := insecure.NewCredentials()
	if a.f.xdsTLSCA != "" {
		b, err := os.ReadFile(a.f.xdsTLSCA)
		if err != nil {
			return fmt.Errorf("-xds-tls-ca: %w", err)
		}
		pool, err := certPool(b)
		if err != nil {
			return fmt.Errorf("-xds-tls-ca %s: %w", a.f.xdsTLSCA, err)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	}
	conn, err := grpc.NewClient(a.f.xds, grpc.WithTransportCredentials(creds))
	if err != nil {
		return fmt.Errorf("-xds %s: %w", a.f.xds, err)
	}
	o := xds.Options{
		Conn: conn, Node: &corev3.Node{Id: a.f.xdsNodeID}, Logger: a.log,
		Apply: a.applyXDS, OnRefused: a.reloadFailed,
	}
	if a.f.mergeDomains {
		o.LoadOptions = []config.LoadOption{config.MergeDomains()} // several resources of one domain
	}
	a.xds, err = xds.New(o)
	if err != nil {
		conn.Close()
		return err
	}
	a.xdsConn = conn
	for _, svc := range []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName} {
		a.health.SetServingStatus(svc, healthpb.HealthCheckResponse_NOT_SERVING)
	}
	return nil
}

// applyXDS is the xDS client's Apply: apply, and once the first
// configuration is running, health SERVING. It runs on the goroutine run
// waits for before the shutdown begins, so it never marks a stopping
// server SERVING.
func (a *app) applyXDS(cfg *config.Config) error {
	if err := a.apply(cfg); err != nil {
		return err
	}
	if !a.xdsReady.Swap(true) {
		for _, svc := range []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName} {
			a.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
		}
	}
	a.reloaded()
	return nil
}

// reloadFailed reports a configuration that was not applied.
func (a *app) reloadFailed(err error) {
	a.metrics.failure()
	a.log.Error("configuration not reloaded, the running one is kept", "err", err.Error())
	if a.loaded != nil {
		a.loaded(err)
	}
}

// shutdown stops serving: health NOT_SERVING, GracefulStop for at most
// -shutdown-grace (none when it is 0), then Stop; then the HTTP server
// and the backend. Only RPCs still in flight when the grace is over are
// logged as stopped.
func (a *app) shutdown() error {
	a.ready.Store(false)
	close(a.stopping)
	a.health.Shutdown()
	stopped := make(chan struct{})
	if a.f.shutdownGrace > 0 {
		go func() {
			a.grpc.GracefulStop()
			close(stopped)
		}()
		timer := time.NewTimer(a.f.shutdownGrace)
		select {
		case <-stopped:
			timer.Stop()
		case <-timer.C:
		}
	}
	select {
	case <-stopped:
	default: // the grace is over, or -shutdown-grace 0 gives none
		if n := a.inflight.Load(); n > 0 {
			a.log.Warn("in-flight RPCs outlived -shutdown-grace: stopping them", "rpcs", n, "shutdown_grace", a.f.shutdownGrace.String())
		}
		a.grpc.Stop()
		if a.f.shutdownGrace > 0 {
			<-stopped
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var errs []error
	if err := a.http.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("HTTP shutdown: %w", err))
	}
	if a.xdsConn != nil {
		a.xdsConn.Close() // its stream ended before the shutdown began
	}
	if err := a.store.Close(); err != nil {
		errs = append(errs, fmt.Errorf("closing the backend: %w", err))
	}
	if a.stopOTel != nil {
		// A telemetry outage must not fail the shutdown of the service:
		// the last export is logged as lost, within the same bound.
		if err := a.stopOTel(ctx); err != nil {
			a.log.Warn("OpenTelemetry: the last metrics were not flushed", "err", err.Error())
		}
	}
	if a.stopTracing != nil {
		if err := a.stopTracing(ctx); err != nil {
			a.log.Warn("OpenTelemetry: the last spans were not flushed", "err", err.Error())
		}
	}
	a.log.Info("stopped")
	return errors.Join(errs...)
}

// countUnary and countStream count the RPCs being handled, so that the
// shutdown can tell whether any outlived -shutdown-grace.
func (a *app) countUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	a.inflight.Add(1)
	defer a.inflight.Add(-1)
	return handler(ctx, req)
}

func (a *app) countStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	a.inflight.Add(1)
	defer a.inflight.Add(-1)
	return handler(srv, ss)
}

// healthService is grpc's health.Server whose Watch streams end once they
// have told NOT_SERVING after shutdown began (at once, for a service that
// was never registered: it is told nothing more): a watcher (grpc-go's
// client-side health checking keeps one open) would otherwise hold the
// graceful stop until -shutdown-grace and have it stop the RPCs.
type healthService struct {
	*health.Server
	stopping <-chan struct{}
}

func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream healthpb.Health_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.stopping:
			// Shutdown tells the watchers of registered services
			// NOT_SERVING (endingWatch then ends them), and those of a
			// service never registered nothing: end theirs now.
			if _, err := h.Server.Check(ctx, &healthpb.HealthCheckRequest{Service: req.GetService()}); status.Code(err) == codes.NotFound {
				cancel()
			}
		}
	}()
	return h.Server.Watch(req, &endingWatch{Health_WatchServer: stream, ctx: ctx, cancel: cancel, stopping: h.stopping})
}

// endingWatch is a Watch stream whose context ends once it sent a status
// other than SERVING after shutdown began.
type endingWatch struct {
	healthpb.Health_WatchServer
	ctx      context.Context
	cancel   context.CancelFunc
	stopping <-chan struct{}
}

func (w *endingWatch) Context() context.Context { return w.ctx }

func (w *endingWatch) Send(m *healthpb.HealthCheckResponse) error {
	err := w.Health_WatchServer.Send(m)
	if m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		select {
		case <-w.stopping:
			w.cancel() // told: the stream ends, and the graceful stop need not wait for it
		default:
		}
	}
	return err
}

// redisLogger writes the Redis client's own messages (go-redis: a
// connection that failed, and the like) to the command's log, at the
// debug level: a Redis that cannot decide is logged by the server, at
// most once a second, at the warning level.
type redisLogger struct{ log *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r.log.Enabled(ctx, slog.LevelDebug) {
		r.log.Debug("redis client", "detail", strings.TrimSpace(fmt.Sprintf(format, v...)))
	}
}

// readSecret reads -partition-key-secret-file.
func readSecret(f *flags) ([]byte, error) {
	if f.pkSecretFile == "" {
		return nil, nil
	}
	if !f.headers {
		return nil, fmt.Errorf("-partition-key-secret-file keys the headers' pk: it needs -headers")
	}
	return secretFile("-partition-key-secret-file", f.pkSecretFile)
}

// secretFile reads the secret in the file of flag name: its bytes, less
// one final line end (as an editor or echo leaves it). An empty secret
// is refused: everyone knows it.
func secretFile(name, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, fmt.Errorf("%s %s is empty", name, path)
	}
	return b, nil
}

// checkLimitHeaders refuses a -limit-header-* name without
// -limit-headers, and a name that is not an HTTP field name, or that
// another of them or a draft-11 header has.
func checkLimitHeaders(fs *flag.FlagSet, f *flags) error {
	names := []struct{ flag, name string }{
		{"-limit-header-limit", f.limitHeader.Limit},
		{"-limit-header-remaining", f.limitHeader.Remaining},
		{"-limit-header-reset", f.limitHeader.Reset},
	}
	seen := map[string]string{"ratelimit": "-headers", "ratelimit-policy": "-headers", "retry-after": "-headers"}
	for _, n := range names {
		set := false
		fs.Visit(func(fl *flag.Flag) { set = set || "-"+fl.Name == n.flag })
		if set && !f.limitHeaders {
			return fmt.Errorf("%s names a header of -limit-headers: it needs -limit-headers", n.flag)
		}
		if !isToken(n.name) {
			return fmt.Errorf("%s %q is not an HTTP header name", n.flag, n.name)
		}
		if other, dup := seen[strings.ToLower(n.name)]; dup {
			return fmt.Errorf("%s %q is a header of %s too", n.flag, n.name, other)
		}
		seen[strings.ToLower(n.name)] = n.flag
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token, as a field name must be.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
