// Command server is a small API behind httplimit: a cheap route, an
// expensive route with an alias, a global layer per client, and the IETF
// RateLimit headers, so the limits can be watched with curl.
//
//	go run ./examples/server            # listens on 127.0.0.1:8080
//	go run ./examples/server -addr :9000
//
// Clients are limited by their Bearer token when they send one, by their
// IP address otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// newHandler builds the API and its rate limit. opts are passed to every
// limiter (tests pass a ManualClock).
func newHandler(opts ...hotlimit.Option) (http.Handler, *httplimit.Middleware, error) {
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]any{
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
		OnKeyError:    httplimit.KeyErrorFallbackIP,
		Headers:       httplimit.HeadersIETF,
		PolicyVersion: "example-1",
		Backend:       httplimit.LocalBackend(append([]hotlimit.Option{hotlimit.WithMaxKeys(100_000)}, opts...)...),
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
	return m.Handler(mux), m, nil
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
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "server: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	h, m, err := newHandler()
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
	fmt.Printf("Its alias /api/v1/report shares the quota; a token gets its own:\n\n")
	fmt.Printf("  curl -si -H 'Authorization: Bearer my-token' %s/api/v1/report\n\n", base)

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
