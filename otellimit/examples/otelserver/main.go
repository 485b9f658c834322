// Command otelserver is examples/server's small API with its rate limit
// observed through OpenTelemetry and log/slog: the request counts, the
// limiter's latency and remaining capacity, its keys and memory, a span
// per limiter decision, and a log line per denial.
//
//	go -C otellimit run ./examples/otelserver -stdout   # metrics and spans on standard output
//
// It lives in the otellimit module, not beside examples/server, because
// the root module must not depend on OpenTelemetry. With -stdout it
// prints spans as they end and the metrics every -interval (10 s) and at
// exit; without it, it builds the same instruments on OpenTelemetry's
// global (no-op) providers, as a service does before it configures an
// exporter. Denials are logged to standard error either way.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/otellimit"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// server is the API, its middleware and what observes it.
type server struct {
	handler http.Handler
	mw      *httplimit.Middleware
	reg     metric.Registration
	denials *httplimit.DenialLogger
}

// newServer builds the API behind the middleware, observed through mp and
// tp, logging denials to logw. opts are passed to every limiter.
func newServer(mp metric.MeterProvider, tp trace.TracerProvider, logw io.Writer, opts ...hotlimit.Option) (*server, error) {
	obs, err := otellimit.New(otellimit.Options{MeterProvider: mp, TracerProvider: tp, Spans: otellimit.SpansAll})
	if err != nil {
		return nil, err
	}
	denials, err := httplimit.NewDenialLogger(slog.New(slog.NewJSONHandler(logw, nil)), httplimit.DenialLogOptions{})
	if err != nil {
		return nil, err
	}
	mw, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"report": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(6), Burst: 3},
			"cheap":  hotlimit.FixedWindow{Limit: 20, Window: 10 * time.Second},
			"global": hotlimit.SlidingWindow{Limit: 30, Window: time.Minute},
		},
		Groups: []httplimit.Group{
			{Name: "report", Patterns: []string{"GET /api/report"}, Limit: "report"},
			{Name: "cheap", Patterns: []string{"GET /api/ping"}, Limit: "cheap"},
			{Name: "health", Patterns: []string{"GET /healthz"}, Exempt: true},
		},
		DefaultGroup:  "cheap",
		Global:        "global",
		Key:           httplimit.IPKey(nil),
		PolicyVersion: "otel-example-1",
		Hook: func(ev admission.Event) {
			obs.Hook(ev)
			denials.Hook(ev)
		},
		Backend:   admission.LocalBackend(append([]hotlimit.Option{hotlimit.WithMaxKeys(100_000)}, opts...)...),
		Observers: []admission.Observer{obs}, // times and traces every decision of the backend
	})
	if err != nil {
		return nil, err
	}
	reg, err := otellimit.ObserveMiddleware(mp, mw)
	if err != nil {
		mw.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	for _, p := range []string{"GET /api/report", "GET /api/ping", "GET /healthz"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintln(w, `{"ok":true}`)
		})
	}
	return &server{handler: mw.Handler(mux), mw: mw, reg: reg, denials: denials}, nil
}

// Close releases the middleware and the instruments' callback.
func (s *server) Close() error {
	s.denials.Flush()
	return errors.Join(s.reg.Unregister(), s.mw.Close())
}

// providers returns the SDK providers writing to w every interval, and a
// function that flushes and stops them.
func providers(w io.Writer, interval time.Duration) (*sdkmetric.MeterProvider, *sdktrace.TracerProvider, func(context.Context) error, error) {
	mexp, err := stdoutmetric.New(stdoutmetric.WithWriter(w))
	if err != nil {
		return nil, nil, nil, err
	}
	texp, err := stdouttrace.New(stdouttrace.WithWriter(w))
	if err != nil {
		return nil, nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(interval))))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(texp))
	stop := func(ctx context.Context) error { return errors.Join(tp.Shutdown(ctx), mp.Shutdown(ctx)) }
	return mp, tp, stop, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	stdout := flag.Bool("stdout", false, "export metrics and spans to standard output (OpenTelemetry's stdout exporters)")
	interval := flag.Duration("interval", 10*time.Second, "how often to print the metrics, with -stdout")
	flag.Parse()
	if flag.NArg() > 0 || *interval <= 0 {
		fmt.Fprintf(os.Stderr, "otelserver: unexpected arguments %q or -interval %v\n", flag.Args(), *interval)
		flag.Usage()
		os.Exit(2)
	}
	var mp metric.MeterProvider = noop.NewMeterProvider()
	var tp trace.TracerProvider = tracenoop.NewTracerProvider()
	stop := func(context.Context) error { return nil }
	if *stdout {
		smp, stp, s, err := providers(os.Stdout, *interval)
		if err != nil {
			log.Fatal(err)
		}
		mp, tp, stop = smp, stp, s
	}
	srv, err := newServer(mp, tp, os.Stderr)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Fprintf(os.Stderr, "listening on %s; the 4th request gets a 429, a denial log line and a denied span:\n\n", base)
	fmt.Fprintf(os.Stderr, "  for i in 1 2 3 4; do curl -s %s/api/report; done\n\n", base)

	hs := &http.Server{Handler: srv.handler, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	go func() {
		<-ctx.Done()
		shut, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		hs.Shutdown(shut)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
	shut, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := stop(shut); err != nil { // the last metrics, while the limiters are still observed
		log.Print(err)
	}
	srv.Close()
}
