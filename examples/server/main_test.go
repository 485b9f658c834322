package main

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

func get(h http.Handler, path, token string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = "198.51.100.7:40000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestServer429(t *testing.T) {
	clock := hotlimit.NewManualClock()
	h, m, err := newHandler(nil, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	// The burst of 3, shared by the route and its alias.
	for i, p := range []string{"/api/report", "/api/v1/report", "/api/report"} {
		w := get(h, p, "")
		if w.Code != http.StatusOK {
			t.Fatalf("request %d to %s: %d", i, p, w.Code)
		}
		if got := w.Header().Get("RateLimit-Policy"); got != `"report";q=3;w=30, "global";q=30;w=60` {
			t.Fatalf("RateLimit-Policy = %q", got)
		}
	}
	w := get(h, "/api/v1/report", "")
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("4th report: %d, want 429", w.Code)
	}
	if w.Header().Get("Retry-After") != "10" || w.Header().Get("RateLimit") != `"report";r=0;t=10, "global";r=27;t=80` {
		t.Fatalf("429 headers: Retry-After %q, RateLimit %q", w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	if !strings.Contains(w.Body.String(), `"error":"rate_limit_exceeded"`) {
		t.Fatalf("429 body: %s", w.Body)
	}
	// Another client (a token) is not affected; the cheap route neither.
	if w := get(h, "/api/report", demoTokens[1]); w.Code != http.StatusOK {
		t.Fatalf("token client: %d", w.Code)
	}
	if w := get(h, "/api/ping", ""); w.Code != http.StatusOK {
		t.Fatalf("cheap route: %d", w.Code)
	}
	// Health checks are exempt.
	for range 50 {
		if w := get(h, "/healthz", ""); w.Code != http.StatusOK {
			t.Fatalf("healthz: %d", w.Code)
		}
	}
	// After Retry-After, the expensive route admits again.
	clock.Advance(10 * time.Second)
	if w := get(h, "/api/report", ""); w.Code != http.StatusOK {
		t.Fatalf("after Retry-After: %d", w.Code)
	}
}

// TestMadeUpTokensGetNoQuota: the limit is keyed by the Bearer token, so
// a token the server does not know must not buy a fresh quota: a client
// that spent its burst cannot reach the expensive route again by sending
// a new made-up token with each request.
func TestMadeUpTokensGetNoQuota(t *testing.T) {
	clock := hotlimit.NewManualClock()
	h, m, err := newHandler(nil, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 3 {
		get(h, "/api/report", "")
	}
	served := 0
	for i := range 20 {
		if w := get(h, "/api/report", "made-up-"+strconv.Itoa(i)); w.Code == http.StatusOK {
			served++
		}
	}
	if served != 0 {
		t.Fatalf("%d of 20 requests with made-up tokens reached the expensive route", served)
	}
	// A token the server issued has its own quota.
	if w := get(h, "/api/report", demoTokens[0]); w.Code != http.StatusOK {
		t.Fatalf("issued token: %d", w.Code)
	}
}

// TestDenialLog: with a DenialLogger as the hook (-log-denials), the 4th
// request to the expensive route is logged once, with its group, and
// without the client's address or token.
func TestDenialLog(t *testing.T) {
	var buf bytes.Buffer
	dl, err := httplimit.NewDenialLogger(slog.New(slog.NewJSONHandler(&buf, nil)), httplimit.DenialLogOptions{Instance: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h, m, err := newHandler(dl.Hook, hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 4 {
		get(h, "/api/report", demoTokens[0])
	}
	out := buf.String()
	if n := strings.Count(out, `"msg":"rate limit denial"`); n != 1 || !strings.Contains(out, `"group":"report"`) {
		t.Fatalf("%d denial lines, want 1 for group report:\n%s", n, out)
	}
	if strings.Contains(out, demoTokens[0]) || strings.Contains(out, "198.51.100.7") {
		t.Fatalf("the log holds the token or the address:\n%s", out)
	}
}
