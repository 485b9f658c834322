// Command server is a small API behind httplimit: a cheap route, an
// expensive route with an alias, a global layer per client, and the IETF
// RateLimit headers, so the limits can be watched with curl.
//
//	go run ./examples/server            # listens on 127.0.0.1:8080
//	go run ./examples/server -addr :9000
//	go run ./examples/server -log-denials   # a JSON log line per denial, on stderr
//
// otellimit/examples/otelserver is the same kind of API exporting its
// metrics and spans through OpenTelemetry (it lives in the otellimit
// module: this one must not depend on OpenTelemetry).
//
// Clients are limited by their Bearer token when they send one, by their
// IP address otherwise. The server knows its tokens (demoTokens) and
// refuses others with 401 before the limit: a limit keyed by a token that
// nobody checks is no limit, since a client could send a new made-up
// token with each request and get a fresh quota each time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// newHandler builds the API and its rate limit. hook, if not nil, sees
// every decision (main passes a DenialLogger's with -log-denials); opts
// are passed to every limiter (tests pass a ManualClock).
func newHandler(hook func(admission.Event), opts ...hotlimit.Option) (http.Handler, *httplimit.Middleware, error) {
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			// The expensive route: a burst of 3, then one every 10 s.
			"report": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(6), Burst: 3},
			// Cheap routes: 20 per 10-second window.
			"cheap": hotlimit.FixedWindow{Limit: 20, Window: 10 * time.Second},
			// Every client, whatever the route: 30 per minute, smoothed.
			"global": hotlimit.SlidingWindow{Limit: 30, Window: time.Minute},
		},
		Groups: []httplimit.Group{
			{Name: "report", Patterns: []string{"GET /api/report", "GET /api/v1/report"}, Limit: "report"},
			{Name: "cheap", Patterns: []string{"GET /api/ping", "GET /api/v1/ping"}, Limit: "cheap"},
			{Name: "health", Patterns: []string{"GET /healthz"}, Exempt: true},
		},
		DefaultGroup:  "cheap",
		Global:        "global",
		Key:           httplimit.TokenKey("Authorization"),
		FallbackToIP:  true,
		Headers:       httplimit.HeadersIETF,
		PolicyVersion: "example-1",
		Hook:          hook,
		Backend:       admission.LocalBackend(append([]hotlimit.Option{hotlimit.WithMaxKeys(100_000)}, opts...)...),
	})
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/report", report)
	mux.HandleFunc("GET /api/v1/report", report)
	mux.HandleFunc("GET /api/ping", ping)
	mux.HandleFunc("GET /api/v1/ping", ping)
	mux.HandleFunc("GET /healthz", ping)
	return authenticate(m.Handler(mux)), m, nil
}

// demoTokens are the API tokens the server accepts.
var demoTokens = []string{"demo-token-1", "demo-token-2"}

// authenticate refuses a request whose Authorization header is not a
// Bearer credential the server issued. It parses the header as
// httplimit.TokenKey does (the first line, the scheme case-insensitively,
// the credential trimmed), so every token the limit sees is a known one;
// a request without the header is limited by its IP address.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v, ok := r.Header["Authorization"]; ok {
			scheme, tok, _ := strings.Cut(strings.TrimSpace(v[0]), " ")
			if !strings.EqualFold(scheme, "Bearer") || !slices.Contains(demoTokens, strings.TrimSpace(tok)) {
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintln(w, `{"error":"invalid_token"}`)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func report(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintln(w, `{"report":"an expensive answer"}`)
}

func ping(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintln(w, `{"pong":true}`)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	logDenials := flag.Bool("log-denials", false, "log each denial as a JSON line on standard error (httplimit.DenialLogger)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "server: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	var hook func(admission.Event)
	if *logDenials {
		dl, err := httplimit.NewDenialLogger(slog.New(slog.NewJSONHandler(os.Stderr, nil)), httplimit.DenialLogOptions{})
		if err != nil {
			log.Fatal(err)
		}
		defer dl.Flush()
		hook = dl.Hook
	}
	h, m, err := newHandler(hook)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	fmt.Printf("listening on %s\n\n", base)
	fmt.Printf("The expensive route admits a burst of 3; the 4th request gets a 429:\n\n")
	fmt.Printf("  for i in 1 2 3 4; do curl -si %s/api/report | grep -iE '^(HTTP|RateLimit|Retry-After|\\{)'; done\n\n", base)
	fmt.Printf("Its alias /api/v1/report shares the quota; a token the server issued gets its own:\n\n")
	fmt.Printf("  curl -si -H 'Authorization: Bearer %s' %s/api/v1/report\n\n", demoTokens[0], base)

	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
