// Package routertest checks a router example: the router that its
// newRouter builds around an httplimit.Middleware limits each client IP,
// refusing with 429 and the rate-limit header fields once the limit is
// reached, and passing requests on to its routes until then.
package routertest

import (
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// Check builds newRouter around the middleware that httplimit.ByIP builds
// (a sliding window per client IP, limit "per-ip"), here of 3 requests a
// minute on a manual clock, and sends GET /hello: each client gets its 3
// with the route's "hello\n" and RateLimit fields, then 429 with
// Retry-After and r=0, without reaching the route; another client is not
// affected; after Retry-After the first is admitted again.
func Check(t *testing.T, newRouter func(*httplimit.Middleware) http.Handler) {
	t.Helper()
	clock := hotlimit.NewManualClock()
	mw, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"per-ip": hotlimit.SlidingWindow{Limit: 3, Window: time.Minute}},
		Groups:       []httplimit.Group{{Name: "all", Limit: "per-ip"}},
		DefaultGroup: "all",
		Key:          httplimit.IPKey(nil),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	h := newRouter(mw)
	get := func(ip string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/hello", nil)
		r.RemoteAddr = ip + ":40000"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	admitted := func(w *httptest.ResponseRecorder, remaining int) {
		t.Helper()
		if w.Code != http.StatusOK || w.Body.String() != "hello\n" {
			t.Fatalf("status %d, body %q: want 200 and the route's hello", w.Code, w.Body)
		}
		if p := w.Header().Get("RateLimit-Policy"); !strings.HasPrefix(p, `"per-ip";q=3;w=60`) {
			t.Errorf("RateLimit-Policy %q, want the per-ip limit of 3 per 60 s", p)
		}
		if rl := w.Header().Get("RateLimit"); !strings.HasPrefix(rl, `"per-ip";r=`+strconv.Itoa(remaining)+";") {
			t.Errorf("RateLimit %q, want r=%d", rl, remaining)
		}
	}
	for i := range 3 {
		admitted(get("192.0.2.1"), 2-i)
	}
	w := get("192.0.2.1")
	retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if w.Code != http.StatusTooManyRequests || err != nil || retry < 1 || strings.Contains(w.Body.String(), "hello") {
		t.Fatalf("4th request: status %d, Retry-After %q, body %q: want 429, a wait in seconds, and no route", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	if rl := w.Header().Get("RateLimit"); !strings.HasPrefix(rl, `"per-ip";r=0;`) {
		t.Errorf("4th request: RateLimit %q, want r=0", rl)
	}
	admitted(get("198.51.100.7"), 2)
	clock.Advance(time.Duration(retry) * time.Second)
	if w := get("192.0.2.1"); w.Code != http.StatusOK {
		t.Errorf("after Retry-After (%d s): status %d, want 200", retry, w.Code)
	}
}
