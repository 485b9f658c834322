package httplimit_test

import (
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// A cheap route and an expensive one with an alias, limited per API token,
// with a global layer per token on top. A ManualClock makes the output
// deterministic; a service leaves the clock out.
func Example() {
	clock := hotlimit.NewManualClock()
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(6), Burst: 2},
			"cheap":  hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
			"global": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(50), Burst: 100},
		},
		Groups: []httplimit.Group{
			{Name: "search", Patterns: []string{"/search", "/v1/search"}, Limit: "search"},
			{Name: "cheap", Limit: "cheap"},
		},
		DefaultGroup: "cheap",
		Global:       "global",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "results")
	}))

	for _, path := range []string{"/search", "/v1/search", "/search"} {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Authorization", "Bearer my-api-token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(path, w.Code, w.Header().Get("RateLimit"))
		if w.Code == http.StatusTooManyRequests {
			fmt.Print("Retry-After: ", w.Header().Get("Retry-After"), " ", w.Body.String())
		}
	}
	fmt.Println(w0(h))
	// Output:
	// /search 200 "search";r=1;t=10, "global";r=99;t=1
	// /v1/search 200 "search";r=0;t=10, "global";r=98;t=1
	// /search 429 "search";r=0;t=10, "global";r=98;t=1
	// Retry-After: 10 {"error":"rate_limit_exceeded","retry_after":10}
	// RateLimit-Policy: "search";q=2;w=20, "global";q=100;w=2
}

func w0(h http.Handler) string {
	r := httptest.NewRequest("GET", "/search", nil)
	r.Header.Set("Authorization", "Bearer another-token")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return "RateLimit-Policy: " + w.Header().Get("RateLimit-Policy")
}

// A limit per API token and one per client IP, in one decision: every
// response carries an item for each, and a request one refuses costs
// nothing in the other. httplimit.By(httplimit.PerIP(rate),
// httplimit.PerToken("Authorization", rate)) is the one-line form; here
// the full Config, on a ManualClock so that the output is the same on
// every run.
func Example_identities() {
	clock := hotlimit.NewManualClock()
	clock.Set(30 * time.Second)
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"per-token": hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
			"per-ip":    hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
		},
		Groups:       []httplimit.Group{{Name: "all", Limit: "per-token"}},
		DefaultGroup: "all",
		Key:          httplimit.TokenKey("Authorization"),
		Identities:   []httplimit.IdentityLimit{{Limit: "per-ip", Key: httplimit.IPKey(nil)}},
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.1:4000"
		r.Header.Set("Authorization", "Bearer my-api-token")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 200 "per-token";r=99;t=30, "per-ip";r=1;t=30
	// 200 "per-token";r=98;t=30, "per-ip";r=0;t=30
	// 429 "per-token";r=98;t=30, "per-ip";r=0;t=30
}

// One budget for every client on top of each client's own: a layer keyed
// by admission.Everyone. Three clients, each within its per-IP limit,
// use up the shared 3 requests; the fourth client is refused by the
// shared layer alone.
func ExampleConfig_everyone() {
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"per-ip": hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
			"server": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
		},
		Groups:       []httplimit.Group{{Name: "all", Limit: "per-ip"}},
		DefaultGroup: "all",
		Identities:   []httplimit.IdentityLimit{{Limit: "server", Key: admission.Everyone[*http.Request]}},
		Backend:      admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock())),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "192.0.2.4"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ip + ":1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(ip, w.Code, w.Header().Get("RateLimit"))
	}
	// Output:
	// 192.0.2.1 200 "per-ip";r=99;t=60, "server";r=2;t=60
	// 192.0.2.2 200 "per-ip";r=99;t=60, "server";r=1;t=60
	// 192.0.2.3 200 "per-ip";r=99;t=60, "server";r=0;t=60
	// 192.0.2.4 429 "per-ip";r=100, "server";r=0;t=60
}

// By(PerIP(rate)) behind a reverse proxy: By trusts no proxy, so write
// its Config out and give it the proxy's ClientIP, once. With Key left
// nil the key is the client IP that ClientIP finds: here the client the
// proxy at 10.0.0.1 names in X-Forwarded-For, each with a quota of its
// own. The clock option By has no room for goes in Backend.
func ExampleBy_behindProxy() {
	proxy, err := admission.NewClientIP([]string{"10.0.0.0/8"}, "X-Forwarded-For", 0, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	rate := hotlimit.PerMinute(1)
	m, err := httplimit.New(httplimit.Config{ // By(PerIP(rate)), behind the proxy
		Limits:       map[string]hotlimit.Policy{"per-ip": hotlimit.SlidingWindow{Limit: rate.N, Window: rate.Per}},
		Groups:       []httplimit.Group{{Name: "all", Limit: "per-ip"}},
		DefaultGroup: "all",
		ClientIP:     proxy,
		Backend:      admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock())),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "10.0.0.1:4242"
		r.Header.Set("X-Forwarded-For", client)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(client, w.Code)
	}
	// Output:
	// 203.0.113.1 200
	// 203.0.113.2 200
	// 203.0.113.1 429
}
