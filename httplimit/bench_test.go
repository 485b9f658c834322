package httplimit

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// nopWriter is a ResponseWriter that keeps only the header map, so the
// benchmark measures the middleware rather than httptest.Recorder.
type nopWriter struct{ h http.Header }

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *nopWriter) WriteHeader(int)             {}

// BenchmarkMiddleware measures an allowed request with a bearer-token key,
// a route group layer and a global layer, IETF headers on.
func BenchmarkMiddleware(b *testing.B) {
	m, err := New(Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000},
			"global": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000},
		},
		Groups:       []Group{{Name: "search", Patterns: []string{"/search", "/v1/search"}, Limit: "search"}},
		DefaultGroup: "search",
		Global:       "global",
		Key:          TokenKey("Authorization"),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/v1/search", nil)
	r.Header.Set("Authorization", "Bearer hl_live_3f9a7c1e5b2d4a6f8e0c1b3d5f7a9c2e4b6d8f0a1c3e5a7b")
	w := &nopWriter{h: make(http.Header)}
	h.ServeHTTP(w, r)
	if w.h.Get("RateLimit") == "" {
		b.Fatal("no RateLimit header")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		h.ServeHTTP(w, r)
	}
}

// BenchmarkLoopback measures what the middleware adds to a request served
// over a real loopback connection by net/http, beside the same handler
// bare: one client, keep-alive, requests in sequence, every one admitted
// (a bearer token, a group layer and a global layer, IETF headers on). The
// difference of the two rows is the middleware's cost per request as a
// client sees it. Besides the wall time it reports cpu-ns/op, the
// process's CPU time (client, server and runtime) per request, which a
// machine shared with other work disturbs far less.
func BenchmarkLoopback(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	m, err := New(Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000},
			"global": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000},
		},
		Groups:       []Group{{Name: "search", Patterns: []string{"/search", "/v1/search"}, Limit: "search"}},
		DefaultGroup: "search",
		Global:       "global",
		Key:          TokenKey("Authorization"),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"handler=bare", ok}, {"handler=middleware", m.Handler(ok)}} {
		b.Run(bc.name, func(b *testing.B) {
			srv := httptest.NewServer(bc.h)
			defer srv.Close()
			c := srv.Client()
			defer c.CloseIdleConnections()
			req, _ := http.NewRequest("GET", srv.URL+"/v1/search", nil)
			req.Header.Set("Authorization", "Bearer hl_live_3f9a7c1e5b2d4a6f8e0c1b3d5f7a9c2e4b6d8f0a1c3e5a7b")
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			for b.Loop() {
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// tenantKey is the context key of BenchmarkIdentities' tenant.
type tenantKey struct{}

// BenchmarkIdentities measures an admitted request in process, IETF
// headers on, checked against one layer (a bearer token's) and against
// three identities in one decision (the token's layer, a per-IP and a
// per-tenant Config.Identities layer): the cost of the identities grown
// from the one-layer start.
func BenchmarkIdentities(b *testing.B) {
	big := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000}
	for _, bc := range []struct {
		name string
		ids  []IdentityLimit
	}{
		{"identities=1", nil},
		{"identities=3", []IdentityLimit{
			{Limit: "per-ip", Key: IPKey(nil)},
			{Limit: "per-tenant", Key: ContextKey("tenant", tenantKey{})},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := New(Config{
				Limits:       map[string]hotlimit.Policy{"per-token": big, "per-ip": big, "per-tenant": big},
				Groups:       []Group{{Name: "search", Patterns: []string{"/v1/search"}, Limit: "per-token"}},
				DefaultGroup: "search",
				Key:          TokenKey("Authorization"),
				Identities:   bc.ids,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest("GET", "/v1/search", nil)
			r.RemoteAddr = "192.0.2.10:5555"
			r.Header.Set("Authorization", "Bearer hl_live_3f9a7c1e5b2d4a6f8e0c1b3d5f7a9c2e4b6d8f0a1c3e5a7b")
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, "acme"))
			w := &nopWriter{h: make(http.Header)}
			h.ServeHTTP(w, r)
			if items := strings.Count(w.h.Get("RateLimit"), ";r="); items != 1+len(bc.ids) {
				b.Fatalf("RateLimit %q: %d items", w.h.Get("RateLimit"), items)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h.ServeHTTP(w, r)
			}
		})
	}
}

// BenchmarkIPv4Decision sets the middleware's decision on an IPv4 client
// beside the core's AllowLayersState on the same two layers (a group's
// and the global one, their limiters, the keys the middleware gives
// them, states asked): AllowLayersState is the core's part; Decide is
// the pipeline's whole decision (the key from the peer address, the
// layers' keys, the backend call, the Result) with the middleware's
// default key, the client IP (a nil Config.Key); DecideIPKey the same
// with Key IPKey(nil), a KeyFunc, whose identity's text the pipeline
// parses back for the in-process keys; Middleware is a request through
// the handler (routing and the IETF headers too). Every request is
// admitted. Compare their instruction counts (callgrind:
// https://github.com/hotlimit/hotlimit/blob/main/bench/instr.sh) rather
// than their times on a shared machine; the figures are in
// https://github.com/hotlimit/hotlimit/blob/main/bench/RESULTS.md.
func BenchmarkIPv4Decision(b *testing.B) {
	cfg := Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000},
			"global": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100_000_000), Burst: 1_000_000},
		},
		Groups:       []Group{{Name: "search", Patterns: []string{"/search", "/v1/search"}, Limit: "search"}},
		DefaultGroup: "search",
		Global:       "global",
	}
	m, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	cfg.Key = IPKey(nil)
	mk, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer mk.Close()
	const ip = "203.0.113.255"
	r := httptest.NewRequest("GET", "/v1/search", nil)
	r.RemoteAddr = ip + ":41234"
	local := m.Backend().(*admission.Local)
	layers := []hotlimit.Layer{
		{Limiter: local.Classes().Class("search"), Key: m.LayerKey("ip:"+ip, "search"), Cost: 1},
		{Limiter: local.Classes().Class("global"), Key: m.LayerKey("ip:"+ip, ""), Cost: 1},
	}
	states := make([]hotlimit.LayerState, len(layers))
	b.Run("AllowLayersState", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hotlimit.AllowLayersState(states, layers...)
		}
	})
	decide := func(m *Middleware) func(b *testing.B) {
		return func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res := m.pipe.Decide(ctx, r, 0, 1)
				if res.Outcome != admission.OutcomeAllowed {
					b.Fatal(res.Outcome, res.Err)
				}
				m.pipe.Release(res)
			}
		}
	}
	b.Run("Decide", decide(m))
	b.Run("DecideIPKey", decide(mk))
	b.Run("Middleware", func(b *testing.B) {
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		w := &nopWriter{h: make(http.Header)}
		h.ServeHTTP(w, r)
		if w.h.Get("RateLimit") == "" {
			b.Fatal("no RateLimit header")
		}
		b.ReportAllocs()
		for b.Loop() {
			h.ServeHTTP(w, r)
		}
	})
	if n := local.Classes().Class("search").Len(); n > 1 {
		b.Fatalf("the search limiter holds %d keys, want at most 1 (the middleware's and the core's layers are one key)", n)
	}
	if k := mk.LayerKey("ip:"+ip, "search"); k != layers[0].Key {
		b.Fatalf("IPKey's group key %q, the default key's %q", k, layers[0].Key)
	}
}
