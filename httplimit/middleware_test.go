package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

const token = "hl_test_7d1f0c9a2b4e6d8f" // a raw token that must never reach the limiter

// harness is a middleware on a ManualClock with a handler that counts calls.
type harness struct {
	m     *Middleware
	h     http.Handler
	clock *hotlimit.ManualClock
	calls int
	waits []time.Duration // the delays Config.Wait was asked for
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	hs := &harness{clock: hotlimit.NewManualClock()}
	hs.clock.Set(1000 * time.Second) // away from 0, so windows have a past
	if cfg.Backend == nil {
		cfg.Backend = LocalBackend(hotlimit.WithClock(hs.clock), hotlimit.WithSweepInterval(0))
	}
	if cfg.Wait == nil {
		cfg.Wait = func(ctx context.Context, d time.Duration) error {
			hs.waits = append(hs.waits, d)
			return ctx.Err()
		}
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	hs.m = m
	hs.h = m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.calls++
		w.WriteHeader(http.StatusOK)
	}))
	return hs
}

// do sends a request for path with the bearer token tok ("" for none).
func (hs *harness) do(path, tok string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = "192.0.2.10:5555"
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	w := httptest.NewRecorder()
	hs.h.ServeHTTP(w, r)
	return w
}

func (hs *harness) local(t *testing.T) *Local {
	t.Helper()
	l, ok := hs.m.Backend().(*Local)
	if !ok {
		t.Fatalf("backend is %T, not *Local", hs.m.Backend())
	}
	return l
}

// tokenIdentity is TokenKey's identity for tok.
func tokenIdentity(t *testing.T, tok string) string {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	id, err := TokenKey("Authorization")(nil, r)
	if err != nil {
		t.Fatal(err)
	}
	return string(id)
}

// parseRateLimit parses `"name";r=R;t=T` (t optional, -1 when absent).
func parseRateLimit(t *testing.T, v string) (name string, r, tt int64) {
	t.Helper()
	parts := strings.Split(v, ";")
	if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[0], `"`) || !strings.HasSuffix(parts[0], `"`) {
		t.Fatalf("RateLimit %q: not `\"name\";r=..;t=..`", v)
	}
	name, tt = strings.Trim(parts[0], `"`), -1
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			t.Fatalf("RateLimit %q: %v", v, err)
		}
		switch k {
		case "r":
			r = n
		case "t":
			tt = n
		default:
			t.Fatalf("RateLimit %q: unknown parameter %q", v, k)
		}
	}
	return name, r, tt
}

func ceilSec(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// TestHeadersFollowDecision drives each algorithm until it denies, and
// checks every response's headers against the Decision of a reference
// limiter fed the same requests on the same clock: RateLimit r is
// Remaining, t is ceil(ResetAfter) when allowed and ceil(RetryAfter) when
// denied, Retry-After is max(1, ceil(RetryAfter)); then it advances the
// clock by exactly t seconds and checks that the retry is admitted.
func TestHeadersFollowDecision(t *testing.T) {
	policies := map[string]hotlimit.Policy{
		"tb":    hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2},
		"tbmin": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 4},
		"fw":    hotlimit.FixedWindow{Limit: 3, Window: 10 * time.Second},
		"sw":    hotlimit.SlidingWindow{Limit: 3, Window: 7 * time.Second},
		"lb":    hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(2), Capacity: 1},
		"log":   hotlimit.SlidingLog{Limit: 3, Window: 5 * time.Second},
	}
	wantPolicy := map[string]string{
		"log":   `"log";q=3;w=5`,
		"tb":    `"tb";q=2;w=1`,
		"tbmin": `"tbmin";q=4;w=24`,
		"fw":    `"fw";q=3;w=10`,
		"sw":    `"sw";q=3;w=7`,
		"lb":    `"lb";q=2;w=1`,
	}
	for name, pol := range policies {
		t.Run(name, func(t *testing.T) {
			hs := newHarness(t, Config{
				Limits:       map[string]hotlimit.Policy{name: pol},
				Groups:       []Group{{Name: "api", Patterns: []string{"/api"}, Limit: name}},
				DefaultGroup: "api",
				Key:          TokenKey("Authorization"),
			})
			hs.clock.Advance(1234567 * time.Microsecond) // not on a second boundary
			ref, err := hotlimit.New(pol, hotlimit.WithClock(hs.clock), hotlimit.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			check := func() (hotlimit.Decision, *httptest.ResponseRecorder) {
				t.Helper()
				w := hs.do("/api", token)
				d := ref.Allow("k")
				if got := w.Header().Get("RateLimit-Policy"); got != wantPolicy[name] {
					t.Fatalf("RateLimit-Policy = %q, want %q", got, wantPolicy[name])
				}
				n, r, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
				if n != name || r != d.Remaining {
					t.Fatalf("RateLimit = %q, want name %q r=%d", w.Header().Get("RateLimit"), name, d.Remaining)
				}
				want := ceilSec(d.ResetAfter)
				if !d.Allowed {
					want = ceilSec(d.RetryAfter)
				}
				if tt != want {
					t.Fatalf("t = %d, want %d (decision %+v)", tt, want, d)
				}
				if d.Allowed != (w.Code == http.StatusOK) {
					t.Fatalf("status %d for decision %+v", w.Code, d)
				}
				return d, w
			}
			var d hotlimit.Decision
			var w *httptest.ResponseRecorder
			for i := 0; i < 10; i++ {
				if d, w = check(); !d.Allowed {
					break
				}
			}
			if d.Allowed {
				t.Fatal("never denied")
			}
			if got, want := w.Header().Get("Retry-After"), strconv.FormatInt(max(1, ceilSec(d.RetryAfter)), 10); got != want {
				t.Fatalf("Retry-After = %q, want %q (RetryAfter %v)", got, want, d.RetryAfter)
			}
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body["error"] != "rate_limit_exceeded" || body["retry_after"] != float64(max(1, ceilSec(d.RetryAfter))) {
				t.Fatalf("body = %s", w.Body)
			}
			_, _, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
			// One nanosecond before the true wait is still denied; at
			// ceil(t) seconds the retry passes.
			hs.clock.Advance(d.RetryAfter - 1)
			if d2, _ := check(); d2.Allowed {
				t.Fatalf("admitted 1ns before RetryAfter %v", d.RetryAfter)
			}
			hs.clock.Advance(-(d.RetryAfter - 1))
			hs.clock.Advance(time.Duration(tt) * time.Second)
			if d3, w3 := check(); !d3.Allowed || w3.Code != http.StatusOK {
				t.Fatalf("retry after t=%ds denied: %+v", tt, d3)
			}
		})
	}
}

func TestLegacyAndBothHeaders(t *testing.T) {
	wall := time.Unix(1_700_000_000, 250_000_000)
	for _, tt := range []struct {
		mode       HeaderMode
		reset      ResetMode
		ietf, leg  bool
		wantReset0 string // X-RateLimit-Reset after the first request
	}{
		{HeadersLegacy, ResetSeconds, false, true, "20"},
		{HeadersLegacy, ResetEpoch, false, true, "1700000021"}, // ceil(wall + 20 s)
		{HeadersBoth, ResetSeconds, true, true, "20"},
		{HeadersNone, ResetSeconds, false, false, ""},
		{HeadersIETF, ResetSeconds, true, false, ""},
	} {
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(3), Burst: 3}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			Headers:      tt.mode,
			Reset:        tt.reset,
			Now:          func() time.Time { return wall },
		})
		w := hs.do("/", token)
		h := w.Header()
		if (h.Get("RateLimit") != "") != tt.ietf || (h.Get("RateLimit-Policy") != "") != tt.ietf {
			t.Errorf("mode %d: RateLimit %q, RateLimit-Policy %q", tt.mode, h.Get("RateLimit"), h.Get("RateLimit-Policy"))
		}
		if !tt.leg {
			if h.Get("X-RateLimit-Limit") != "" {
				t.Errorf("mode %d: legacy headers present", tt.mode)
			}
			continue
		}
		if h.Get("X-RateLimit-Limit") != "3" || h.Get("X-RateLimit-Remaining") != "2" || h.Get("X-RateLimit-Reset") != tt.wantReset0 {
			t.Errorf("mode %d reset %d: X-RateLimit-* = %q %q %q, want 3 2 %s", tt.mode, tt.reset,
				h.Get("X-RateLimit-Limit"), h.Get("X-RateLimit-Remaining"), h.Get("X-RateLimit-Reset"), tt.wantReset0)
		}
	}
}

// TestNeverPasses: a request whose cost exceeds the limit can never pass:
// 429 without Retry-After, no t, no retry_after in the body.
func TestNeverPasses(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		Groups:       []Group{{Name: "huge", Limit: "l", Cost: 6}},
		DefaultGroup: "huge",
		Key:          TokenKey("Authorization"),
	})
	w := hs.do("/", token)
	if w.Code != http.StatusTooManyRequests || hs.calls != 0 {
		t.Fatalf("status %d, calls %d", w.Code, hs.calls)
	}
	if _, ok := w.Header()["Retry-After"]; ok {
		t.Errorf("Retry-After = %q on a request that can never pass", w.Header().Get("Retry-After"))
	}
	if _, r, tt := parseRateLimit(t, w.Header().Get("RateLimit")); r != 5 || tt != -1 {
		t.Errorf("RateLimit = %q, want r=5 and no t", w.Header().Get("RateLimit"))
	}
	if strings.TrimSpace(w.Body.String()) != `{"error":"rate_limit_exceeded"}` {
		t.Errorf("body = %s", w.Body)
	}
}

func TestTokenNeverReachesBackend(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	rec := func(limits map[string]hotlimit.Policy) (Backend, error) {
		l, err := NewLocal(limits)
		return backendFunc(func(ctx context.Context, ls []Layer) (hotlimit.Decision, error) {
			mu.Lock()
			for _, ly := range ls {
				keys = append(keys, ly.Key)
			}
			mu.Unlock()
			return l.Allow(ctx, ls)
		}), err
	}
	var events []Event
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}, "all": hotlimit.FixedWindow{Limit: 50, Window: time.Minute}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Global:       "all",
		Key:          TokenKey("Authorization"),
		Backend:      rec,
		Hook:         func(e Event) { events = append(events, e) },
	})
	hs.do("/", token)
	hs.do("/", "  "+token+"  ") // normalised: the same key
	id := tokenIdentity(t, token)
	want := []string{"rl:v1:" + id + ":route:g", "rl:v1:" + id, "rl:v1:" + id + ":route:g", "rl:v1:" + id}
	if LayerKey(id, "g") != want[0] || LayerKey(id, "") != want[1] {
		t.Fatalf("LayerKey = %q, %q", LayerKey(id, "g"), LayerKey(id, ""))
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("keys = %q, want %q", keys, want)
	}
	for _, k := range keys {
		if strings.Contains(k, token) || strings.Contains(k, "7d1f0c9a") {
			t.Fatalf("key %q contains the raw token", k)
		}
	}
	if len(events) != 2 || events[0].IdentityHash == 0 || events[0].IdentityHash != events[1].IdentityHash {
		t.Fatalf("events = %+v", events)
	}
}

type backendFunc func(context.Context, []Layer) (hotlimit.Decision, error)

func (f backendFunc) Allow(ctx context.Context, ls []Layer) (hotlimit.Decision, error) {
	return f(ctx, ls)
}

func TestKeyFuncs(t *testing.T) {
	type ctxKey struct{}
	withID := func(v any) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		return r.WithContext(context.WithValue(r.Context(), ctxKey{}, v))
	}
	hdr := func(name, v string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set(name, v)
		return r
	}
	tok := tokenIdentity(t, "abc")
	tests := []struct {
		name string
		fn   KeyFunc
		r    *http.Request
		want string // "" means an error is wanted
	}{
		{"bearer", TokenKey("Authorization"), hdr("Authorization", "Bearer abc"), tok},
		{"bearer case and spaces", TokenKey("authorization"), hdr("Authorization", "  bEaReR   abc "), tok},
		{"api key header", TokenKey("X-API-Key"), hdr("X-Api-Key", " abc "), tok},
		{"basic scheme is no token", TokenKey("Authorization"), hdr("Authorization", "Basic abc"), ""},
		{"empty bearer", TokenKey("Authorization"), hdr("Authorization", "Bearer   "), ""},
		{"no header", TokenKey("X-API-Key"), httptest.NewRequest("GET", "/", nil), ""},
		{"tenant plain", ContextKey("tenant", ctxKey{}), withID(" acme-corp "), "tenant:acme-corp"},
		{"user email", ContextKey("user", ctxKey{}), withID("Ann@example.com"), "user:Ann@example.com"},
		{"forged separator hashed", ContextKey("tenant", ctxKey{}), withID("x:route:admin"), "tenant:~"},
		{"missing id", ContextKey("tenant", ctxKey{}), httptest.NewRequest("GET", "/", nil), ""},
		{"non-string id", ContextKey("tenant", ctxKey{}), withID(42), ""},
		{"bad kind", ContextKey("Ten:ant", ctxKey{}), withID("acme"), ""},
		// "ip" and "tok" would let a context value impersonate IPKey's or TokenKey's keys.
		{"reserved kind ip", ContextKey("ip", ctxKey{}), withID("192.0.2.1"), ""},
		{"reserved kind tok", ContextKey("tok", ctxKey{}), withID("0123"), ""},
		{"hmac without a secret", TokenKeyHMAC("Authorization", nil), hdr("Authorization", "Bearer abc"), ""},
		{"ip", IPKey(nil), reqFrom("[2001:db8:1:2::9]:1", ""), "ip:2001:db8:1:2::/64"},
		{"ip v4", IPKey(nil), reqFrom("192.0.2.1:1", ""), "ip:192.0.2.1"},
		{"ip none", IPKey(nil), reqFrom("@", ""), ""},
	}
	for _, tt := range tests {
		got, err := tt.fn(nil, tt.r)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("%s: got %q, want an error", tt.name, got)
		case tt.want != "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && !strings.HasPrefix(string(got), tt.want):
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		case strings.Contains(string(got), ":route:"):
			t.Errorf("%s: identity %q contains the route separator", tt.name, got)
		}
	}
	if !strings.HasPrefix(tok, "tok:") || len(tok) != 4+32 || strings.Contains(tok, "abc") {
		t.Errorf("token identity %q: want tok: and 32 hex digits", tok)
	}
	a, _ := TokenKeyHMAC("Authorization", []byte("s1"))(nil, hdr("Authorization", "Bearer abc"))
	b, _ := TokenKeyHMAC("Authorization", []byte("s2"))(nil, hdr("Authorization", "Bearer abc"))
	if string(a) == string(b) || string(a) == tok || len(a) != len(tok) {
		t.Errorf("HMAC identities %q %q (plain %q): want distinct per secret", a, b, tok)
	}
}

func TestAliasesShareGroup(t *testing.T) {
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{"exp": hotlimit.FixedWindow{Limit: 3, Window: time.Minute}, "cheap": hotlimit.FixedWindow{Limit: 100, Window: time.Minute}},
		Groups: []Group{
			{Name: "search", Patterns: []string{"/search", "/v1/search", "GET /v2/find/{q}"}, Limit: "exp"},
			{Name: "other", Limit: "cheap"},
		},
		DefaultGroup: "other",
		Key:          TokenKey("Authorization"),
	})
	for i, p := range []string{"/search", "/v1/search", "/v2/find/cats"} {
		if w := hs.do(p, token); w.Code != http.StatusOK || !strings.Contains(w.Header().Get("RateLimit"), "r="+strconv.Itoa(2-i)) {
			t.Fatalf("%s: %d %q", p, w.Code, w.Header().Get("RateLimit"))
		}
	}
	for _, p := range []string{"/search", "//v1/./search", "/v2/find/dogs"} {
		if w := hs.do(p, token); w.Code != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d, want 429 (the group's quota is spent)", p, w.Code)
		}
	}
	if w := hs.do("/elsewhere", token); w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("RateLimit"), `"cheap";r=99`) {
		t.Fatalf("default group: %d %q", w.Code, w.Header().Get("RateLimit"))
	}
	c := hs.m.Counts()
	if c[0].Group != "search" || c[0].Counts[Allowed] != 3 || c[0].Counts[Denied] != 3 || c[1].Counts[Allowed] != 1 {
		t.Fatalf("Counts = %+v", c)
	}
}

// TestGlobalAllOrNothing: a request denied by the global layer consumes
// nothing in its group's layer, and the headers name the binding layer.
func TestGlobalAllOrNothing(t *testing.T) {
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{
			"a":   hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 10},
			"b":   hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 10},
			"all": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
		},
		Groups:       []Group{{Name: "a", Patterns: []string{"/a"}, Limit: "a"}, {Name: "b", Patterns: []string{"/b"}, Limit: "b"}},
		DefaultGroup: "a",
		Global:       "all",
		Key:          TokenKey("Authorization"),
	})
	for i := range 3 {
		w := hs.do("/b", token)
		if w.Code != http.StatusOK {
			t.Fatalf("/b: %d", w.Code)
		}
		// The binding layer is the one with the fewest remaining: the
		// global window (3 per minute; the window ends at 1020 s, 20 s
		// from now), whose reset is also the larger of the two.
		if name, r, tt := parseRateLimit(t, w.Header().Get("RateLimit")); name != "all" || r != int64(2-i) || tt != 20 {
			t.Fatalf("/b #%d: RateLimit = %q, want \"all\";r=%d;t=20", i, w.Header().Get("RateLimit"), 2-i)
		}
	}
	w := hs.do("/a", token)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("/a: %d, want 429 from the global layer", w.Code)
	}
	if name, r, _ := parseRateLimit(t, w.Header().Get("RateLimit")); name != "all" || r != 0 {
		t.Errorf("RateLimit = %q, want the global layer named", w.Header().Get("RateLimit"))
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"a";q=10;w=60, "all";q=3;w=60` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	key := LayerKey(tokenIdentity(t, token), "a")
	if key != "rl:v1:"+tokenIdentity(t, token)+":route:a" {
		t.Fatalf("LayerKey = %q", key)
	}
	if d := hs.local(t).Limiter("a").AllowN(key, 0); d.Remaining != 10 {
		t.Fatalf("group a Remaining = %d after a global denial, want 10 (nothing consumed)", d.Remaining)
	}
	// Another token has its own global quota.
	if w := hs.do("/a", "other-token"); w.Code != http.StatusOK {
		t.Fatalf("other token: %d", w.Code)
	}
}

func TestDryRun(t *testing.T) {
	var outcomes []Outcome
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 2, Window: time.Minute}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
		DryRun:       true,
		Hook:         func(e Event) { outcomes = append(outcomes, e.Outcome) },
	})
	for range 4 {
		w := hs.do("/", token)
		if w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" || w.Header().Get("Retry-After") != "" {
			t.Fatalf("dry run: %d %v", w.Code, w.Header())
		}
	}
	if hs.calls != 4 {
		t.Fatalf("handler called %d times, want 4", hs.calls)
	}
	want := []Outcome{Allowed, Allowed, DryRunDenied, DryRunDenied}
	for i := range want {
		if outcomes[i] != want[i] {
			t.Fatalf("outcomes = %v, want %v", outcomes, want)
		}
	}
	if c := hs.m.Counts()[0].Counts; c[Allowed] != 2 || c[DryRunDenied] != 2 || c[Denied] != 0 {
		t.Fatalf("counts = %v", c)
	}
}

func TestHook(t *testing.T) {
	var evs []Event
	hs := newHarness(t, Config{
		Limits:        map[string]hotlimit.Policy{"l": hotlimit.SlidingWindow{Limit: 1, Window: time.Minute}},
		Groups:        []Group{{Name: "g", Limit: "l"}},
		DefaultGroup:  "g",
		Key:           TokenKey("Authorization"),
		PolicyVersion: "2026-11-29.1",
		Hook:          func(e Event) { evs = append(evs, e) },
	})
	hs.do("/", token)
	hs.do("/", token)
	hs.do("/", "someone-else")
	if len(evs) != 3 {
		t.Fatalf("%d events", len(evs))
	}
	e := evs[0]
	if e.Group != "g" || e.Algorithm != "SlidingWindow" || e.Limit != "l" || e.PolicyVersion != "2026-11-29.1" ||
		e.Outcome != Allowed || e.Decision.Remaining != 0 || e.Request == nil || e.IdentityHash == 0 {
		t.Errorf("event 0 = %+v", e)
	}
	if evs[1].Outcome != Denied || evs[1].Decision.Allowed || evs[1].IdentityHash != e.IdentityHash {
		t.Errorf("event 1 = %+v", evs[1])
	}
	if evs[2].Outcome != Allowed || evs[2].IdentityHash == e.IdentityHash {
		t.Errorf("event 2 = %+v", evs[2])
	}
}

func TestBackendFailure(t *testing.T) {
	down := errors.New("store down")
	failing := func(map[string]hotlimit.Policy) (Backend, error) {
		return backendFunc(func(context.Context, []Layer) (hotlimit.Decision, error) { return hotlimit.Decision{}, down }), nil
	}
	for _, mode := range []FailMode{FailClosed, FailOpen} {
		var ev Event
		hs := newHarness(t, Config{
			Limits:         map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 2, Window: time.Minute}},
			Groups:         []Group{{Name: "g", Limit: "l"}},
			DefaultGroup:   "g",
			Key:            TokenKey("Authorization"),
			Backend:        failing,
			OnBackendError: mode,
			Hook:           func(e Event) { ev = e },
		})
		w := hs.do("/", token)
		if !errors.Is(ev.Err, down) {
			t.Errorf("mode %d: hook Err = %v", mode, ev.Err)
		}
		if w.Header().Get("RateLimit") != "" || w.Header().Get("Retry-After") != "" {
			t.Errorf("mode %d: rate-limit headers on a backend failure: %v", mode, w.Header())
		}
		if mode == FailClosed {
			if w.Code != http.StatusServiceUnavailable || hs.calls != 0 || ev.Outcome != ErrorDenied ||
				strings.TrimSpace(w.Body.String()) != `{"error":"rate_limiter_unavailable"}` {
				t.Errorf("fail-closed: %d calls=%d outcome=%v body=%s", w.Code, hs.calls, ev.Outcome, w.Body)
			}
		} else if w.Code != http.StatusOK || hs.calls != 1 || ev.Outcome != ErrorAllowed {
			t.Errorf("fail-open: %d calls=%d outcome=%v", w.Code, hs.calls, ev.Outcome)
		}
	}
}

func TestKeyExtractionFailure(t *testing.T) {
	cfg := Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
	}
	hs := newHarness(t, cfg)
	w := hs.do("/", "")
	if w.Code != http.StatusTooManyRequests || hs.calls != 0 || w.Header().Get("Retry-After") != "" ||
		strings.TrimSpace(w.Body.String()) != `{"error":"rate_limit_key_missing"}` {
		t.Fatalf("deny: %d calls=%d %v %s", w.Code, hs.calls, w.Header(), w.Body)
	}
	if c := hs.m.Counts()[0].Counts; c[KeyDenied] != 1 {
		t.Fatalf("counts = %v", c)
	}

	cfg.OnKeyError = KeyErrorFallbackIP
	var ev Event
	cfg.Hook = func(e Event) { ev = e }
	hs = newHarness(t, cfg)
	if w := hs.do("/", ""); w.Code != http.StatusOK || !ev.Fallback {
		t.Fatalf("fallback: %d %+v", w.Code, ev)
	}
	// The IP's quota (1) is spent: a second tokenless request is denied,
	// while a request with a token has its own quota.
	if w := hs.do("/", ""); w.Code != http.StatusTooManyRequests {
		t.Fatalf("fallback second request: %d", w.Code)
	}
	if w := hs.do("/", token); w.Code != http.StatusOK {
		t.Fatalf("token after fallback: %d", w.Code)
	}
	if d := hs.local(t).Limiter("l").AllowN("rl:v1:ip:192.0.2.10:route:g", 0); d.Remaining != 0 {
		t.Fatalf("IP key Remaining = %d, want 0", d.Remaining)
	}
	// No IP either: denied, never let through.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	w = httptest.NewRecorder()
	hs.h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || ev.Outcome != KeyDenied || !errors.Is(ev.Err, ErrNoClientIP) {
		t.Fatalf("no key, no IP: %d %+v", w.Code, ev)
	}
}

func TestExemptions(t *testing.T) {
	var outs []Outcome
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
		Groups: []Group{
			{Name: "health", Patterns: []string{"/healthz"}, Exempt: true},
			{Name: "api", Limit: "l"},
		},
		DefaultGroup:     "api",
		Key:              TokenKey("Authorization"),
		ExemptIdentities: []string{tokenIdentity(t, "internal-batch")},
		Hook:             func(e Event) { outs = append(outs, e.Outcome) },
	})
	for range 3 {
		if w := hs.do("/healthz", ""); w.Code != http.StatusOK || w.Header().Get("RateLimit") != "" {
			t.Fatalf("exempt group: %d", w.Code)
		}
		if w := hs.do("/api", "internal-batch"); w.Code != http.StatusOK {
			t.Fatalf("exempt identity: %d", w.Code)
		}
	}
	hs.do("/api", token)
	if w := hs.do("/api", token); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a non-exempt token is limited: %d", w.Code)
	}
	// A request cannot exempt itself by asking: only configuration does.
	r := httptest.NewRequest("GET", "/api", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("X-Exempt", "1")
	w := httptest.NewRecorder()
	hs.h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("self-exemption: %d", w.Code)
	}
	c := hs.m.Counts()
	if c[0].Counts[Exempt] != 3 || c[1].Counts[Exempt] != 3 || c[1].Counts[Denied] != 2 || len(outs) != 9 {
		t.Fatalf("counts %+v, %d events", c, len(outs))
	}
}

func TestCustomDenyAndClassify(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
		Groups:       []Group{{Name: "writes", Limit: "l"}, {Name: "reads", Exempt: true}},
		DefaultGroup: "reads",
		Classify: func(r *http.Request) string {
			if r.Method == http.MethodPost {
				return "writes"
			}
			return "no-such-group"
		},
		Key: TokenKey("Authorization"),
		Deny: func(w http.ResponseWriter, r *http.Request, d Denial) {
			w.WriteHeader(d.Status)
			w.Write([]byte("slow down " + strconv.FormatInt(d.RetryAfter, 10)))
		},
	})
	post := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		hs.h.ServeHTTP(w, r)
		return w
	}
	post()
	w := post()
	// The window started at 1000 s on the clock: 60 s windows end at 1020 s.
	if w.Code != http.StatusTooManyRequests || w.Body.String() != "slow down 20" || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("custom deny: %d %q %v", w.Code, w.Body, w.Header())
	}
	for range 3 {
		if w := hs.do("/x", token); w.Code != http.StatusOK {
			t.Fatalf("unknown group falls back to the exempt default: %d", w.Code)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	ok := func() Config {
		return Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l", Patterns: []string{"/x"}}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
		}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no key", func(c *Config) { c.Key = nil }, "Config.Key"},
		{"no groups", func(c *Config) { c.Groups = nil }, "Config.Groups"},
		{"unknown default", func(c *Config) { c.DefaultGroup = "nope" }, "DefaultGroup"},
		{"unknown limit", func(c *Config) { c.Groups[0].Limit = "nope" }, `Limit "nope"`},
		{"unknown global", func(c *Config) { c.Global = "nope" }, "Config.Global"},
		{"bad group name", func(c *Config) { c.Groups[0].Name = "a:b" }, `name "a:b"`},
		{"bad limit name", func(c *Config) {
			c.Limits = map[string]hotlimit.Policy{`a"b`: hotlimit.FixedWindow{Limit: 1, Window: 1}}
		}, "Config.Limits"},
		{"duplicate group", func(c *Config) { c.Groups = append(c.Groups, Group{Name: "g", Exempt: true}) }, "duplicate"},
		{"bad pattern", func(c *Config) { c.Groups[0].Patterns = []string{"GET /{"} }, "pattern"},
		{"duplicate pattern", func(c *Config) {
			c.Groups = append(c.Groups, Group{Name: "h", Exempt: true, Patterns: []string{"/x"}})
		}, "already in group"},
		{"conflicting pattern", func(c *Config) {
			c.Groups = append(c.Groups, Group{Name: "h", Exempt: true, Patterns: []string{"/{a}/y"}})
			c.Groups[0].Patterns = []string{"/x/{b}"}
		}, "pattern"},
		{"negative cost", func(c *Config) { c.Groups[0].Cost = -1 }, "Cost"},
		{"bad policy", func(c *Config) { c.Limits["l"] = hotlimit.FixedWindow{Limit: 0, Window: time.Minute} }, "Limit must be > 0"},
		{"nil policy", func(c *Config) { c.Limits["l"] = nil }, "unsupported policy"},
		{"nil policy pointer", func(c *Config) { c.Limits["l"] = (*hotlimit.TokenBucket)(nil) }, "nil"},
		{"bad header mode", func(c *Config) { c.Headers = 9 }, "HeaderMode"},
		{"bad client ip", func(c *Config) { c.ClientIP = &ClientIP{IPv6Bits: 200} }, "IPv6Bits"},
		{"factory error", func(c *Config) {
			c.Backend = func(map[string]hotlimit.Policy) (Backend, error) { return nil, errors.New("no redis") }
		}, "no redis"},
		{"nil backend", func(c *Config) {
			c.Backend = func(map[string]hotlimit.Policy) (Backend, error) { return nil, nil }
		}, "nil Backend"},
	}
	for _, tt := range tests {
		cfg := ok()
		tt.mutate(&cfg)
		m, err := New(cfg)
		if err == nil {
			m.Close()
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "httplimit: ") {
			t.Errorf("%s: error %q, want it to mention %q", tt.name, err, tt.want)
		}
	}
	m, err := New(ok())
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	m.Close()
}

func TestConcurrentExactCounts(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 50, Window: time.Hour}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
	})
	h := hs.m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Authorization", "Bearer "+token)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				mu.Lock()
				codes[w.Code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if codes[200] != 50 || codes[429] != 110 {
		t.Fatalf("codes = %v, want 50 × 200 and 110 × 429", codes)
	}
	if c := hs.m.Counts()[0].Counts; c[Allowed] != 50 || c[Denied] != 110 {
		t.Fatalf("counts = %v", c)
	}
}

// TestLeakyBucketDelay: an admitted request with a Delay waits it out
// before the handler runs; if the client goes away meanwhile, the handler
// is not called.
func TestLeakyBucketDelay(t *testing.T) {
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"lb": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(4), Capacity: 2}},
		Groups:       []Group{{Name: "g", Limit: "lb"}},
		DefaultGroup: "g",
		Key:          TokenKey("Authorization"),
	})
	for range 3 {
		if w := hs.do("/", token); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
	}
	if len(hs.waits) != 2 || hs.waits[0] != 250*time.Millisecond || hs.waits[1] != 500*time.Millisecond || hs.calls != 3 {
		t.Fatalf("waits = %v, calls = %d; want [250ms 500ms], 3", hs.waits, hs.calls)
	}
	hs.clock.Advance(time.Second)
	hs.do("/", token) // no delay
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	r.Header.Set("Authorization", "Bearer "+token)
	hs.h.ServeHTTP(httptest.NewRecorder(), r)
	if hs.calls != 4 || len(hs.waits) != 3 {
		t.Fatalf("calls = %d, waits = %v: a request whose client left must not reach the handler", hs.calls, hs.waits)
	}
}

// TestBadKeyFunc: a KeyFunc that ignores dst or returns nothing is a key
// failure, never a panic or an empty shared key.
func TestBadKeyFunc(t *testing.T) {
	for name, fn := range map[string]KeyFunc{
		"ignores dst":     func(dst []byte, r *http.Request) ([]byte, error) { return []byte("x"), nil },
		"appends nothing": func(dst []byte, r *http.Request) ([]byte, error) { return dst, nil },
		"nil":             func(dst []byte, r *http.Request) ([]byte, error) { return nil, nil },
	} {
		var ev Event
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          fn,
			Hook:         func(e Event) { ev = e },
		})
		if w := hs.do("/", ""); w.Code != http.StatusTooManyRequests || ev.Outcome != KeyDenied || !errors.Is(ev.Err, errBadKeyFunc) {
			t.Errorf("%s: %d %+v", name, w.Code, ev)
		}
	}
}

// TestDryRunNeverBlocks: a dark-launched limit changes nothing for the
// client, whatever happens: no key (under KeyErrorDeny), a backend that
// fails (under FailClosed), or a LeakyBucket that would shape the request
// with a Delay. The handler is called at once every time, and the outcome
// still tells what enforcement would have done.
func TestDryRunNeverBlocks(t *testing.T) {
	var ev Event
	base := func() Config {
		return Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
			DryRun:       true,
			Hook:         func(e Event) { ev = e },
		}
	}

	hs := newHarness(t, base())
	if w := hs.do("/", ""); w.Code != http.StatusOK || hs.calls != 1 || w.Header().Get("Retry-After") != "" {
		t.Errorf("dry run, no key: %d, calls=%d; want the handler called", w.Code, hs.calls)
	}
	if ev.Outcome != DryRunDenied || !errors.Is(ev.Err, ErrNoKey) {
		t.Errorf("dry run, no key: event %+v, want DryRunDenied with ErrNoKey", ev)
	}

	cfg := base()
	down := errors.New("store down")
	cfg.Backend = func(map[string]hotlimit.Policy) (Backend, error) {
		return backendFunc(func(context.Context, []Layer) (hotlimit.Decision, error) { return hotlimit.Decision{}, down }), nil
	}
	hs = newHarness(t, cfg) // FailClosed, the default
	if w := hs.do("/", token); w.Code != http.StatusOK || hs.calls != 1 {
		t.Errorf("dry run, backend down: %d, calls=%d; want the handler called", w.Code, hs.calls)
	}
	if ev.Outcome != ErrorAllowed || !errors.Is(ev.Err, down) {
		t.Errorf("dry run, backend down: event %+v, want ErrorAllowed", ev)
	}

	cfg = base()
	cfg.Limits = map[string]hotlimit.Policy{"l": hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 5}}
	hs = newHarness(t, cfg)
	for range 3 {
		if w := hs.do("/", token); w.Code != http.StatusOK {
			t.Fatalf("dry run, leaky bucket: %d", w.Code)
		}
	}
	if hs.calls != 3 || len(hs.waits) != 0 {
		t.Errorf("dry run, leaky bucket: calls=%d waits=%v; want 3 calls and no shaping delay", hs.calls, hs.waits)
	}
	if ev.Outcome != Allowed || ev.Decision.Delay != 2*time.Second {
		t.Errorf("dry run, leaky bucket: event %+v, want Allowed with the Delay it would have had", ev)
	}
}

// TestBindingSameCapacity: the group and the global limits have the same
// capacity (3) but different windows, so Decision.Limit cannot say which
// one bound. The global binds (the group's window has more left), and the
// RateLimit header and Event.Limit must name it; with a backend that
// cannot report the layer, the middleware falls back to the group's name.
func TestBindingSameCapacity(t *testing.T) {
	limits := map[string]hotlimit.Policy{
		"g":   hotlimit.FixedWindow{Limit: 3, Window: time.Hour},
		"all": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
	}
	for _, reporting := range []bool{true, false} {
		var events []Event
		cfg := Config{
			Limits:       limits,
			Groups:       []Group{{Name: "g", Limit: "g"}},
			DefaultGroup: "g",
			Global:       "all",
			Key:          TokenKey("Authorization"),
			Hook:         func(ev Event) { events = append(events, ev) },
		}
		clock := hotlimit.NewManualClock()
		clock.Set(1000 * time.Second)
		if !reporting {
			cfg.Backend = func(l map[string]hotlimit.Policy) (Backend, error) {
				b, err := NewLocal(l, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
				return plainBackend{l: b}, err
			}
		} else {
			cfg.Backend = LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
		}
		hs := newHarness(t, cfg)
		// One request's worth already spent in the global window, by the
		// key the middleware gives the global layer.
		global := "rl:v1:" + tokenIdentity(t, token)
		hs.m.Backend().(interface {
			Limiter(string) *hotlimit.Limiter
		}).Limiter("all").AllowN(global, 1)
		w := hs.do("/", token)
		if w.Code != http.StatusOK {
			t.Fatalf("reporting=%v: %d", reporting, w.Code)
		}
		name, r, tt := parseRateLimit(t, w.Header().Get("RateLimit"))
		// t is the largest reset of the layers (the group's hour window
		// ends at 3600 s), so that a client waiting t is admitted whichever
		// layer refused; r is the binding layer's.
		want, wantT := "all", int64(2600)
		if !reporting {
			want = "g" // a tie on capacity: named by the fallback
		}
		if name != want || r != 1 || tt != wantT {
			t.Errorf("reporting=%v: RateLimit = %q, want %q;r=1;t=%d", reporting, w.Header().Get("RateLimit"), want, wantT)
		}
		if len(events) != 1 || events[0].Limit != want {
			t.Errorf("reporting=%v: events %+v, want one naming %q", reporting, events, want)
		}
	}
}

// plainBackend is Local without AllowBinding, as a Backend that cannot
// report the binding layer would be.
type plainBackend struct{ l *Local }

func (p plainBackend) Allow(ctx context.Context, layers []Layer) (hotlimit.Decision, error) {
	return p.l.Allow(ctx, layers)
}

func (p plainBackend) Limiter(name string) *hotlimit.Limiter { return p.l.Limiter(name) }
func (p plainBackend) Close() error                          { return p.l.Close() }
