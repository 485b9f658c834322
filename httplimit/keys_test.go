package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
)

func TestTokenNeverReachesBackend(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	rec := func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		l, err := newLocal(limits)
		return backendFunc(func(ctx context.Context, ls []admission.Layer) (hotlimit.Decision, error) {
			mu.Lock()
			for _, ly := range ls {
				keys = append(keys, ly.Key)
			}
			mu.Unlock()
			d, _, err := l.AllowStates(ctx, ls, nil)
			return d, err
		}), err
	}
	var events []admission.Event
	hs := newHarness(t, Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}, "all": hotlimit.FixedWindow{Limit: 50, Window: time.Minute}},
		Groups:       []Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Global:       "all",
		Key:          TokenKey("Authorization"),
		Backend:      rec,
		Hook:         func(e admission.Event) { events = append(events, e) },
	})
	hs.do("/", token)
	hs.do("/", "  "+token+"  ") // normalised: the same key
	id := tokenIdentity(t, token)
	want := []string{"rl:v1:" + id + ":route:g", "rl:v1:" + id, "rl:v1:" + id + ":route:g", "rl:v1:" + id}
	if ident.LayerKey(id, "g") != want[0] || ident.LayerKey(id, "") != want[1] {
		t.Fatalf("LayerKey = %q, %q", ident.LayerKey(id, "g"), ident.LayerKey(id, ""))
	}
	if hs.m.LayerKey(id, "g") != want[0] || hs.m.LayerKey(id, "") != want[1] {
		t.Fatalf("Middleware.LayerKey = %q, %q with a backend not Local", hs.m.LayerKey(id, "g"), hs.m.LayerKey(id, ""))
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
		fn   admission.KeyFunc[*http.Request]
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
		{"blank id", ContextKey("tenant", ctxKey{}), withID(" \t "), ""},
		{"non-string id", ContextKey("tenant", ctxKey{}), withID(42), ""},
		{"bad kind", ContextKey("Ten:ant", ctxKey{}), withID("acme"), ""},
		// "ip", "tok" and "all" would let a context value impersonate IPKey's, TokenKey's or admission.Everyone's keys.
		{"reserved kind ip", ContextKey("ip", ctxKey{}), withID("192.0.2.1"), ""},
		{"reserved kind tok", ContextKey("tok", ctxKey{}), withID("0123"), ""},
		{"reserved kind all", ContextKey("all", ctxKey{}), withID("x"), ""},
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
	// The error names every kind ident.ValidKind refuses.
	for _, kind := range []string{"ip", "tok", "all", "Ten:ant"} {
		_, err := ContextKey(kind, ctxKey{})(nil, withID("acme"))
		if want := `, and not "ip", "tok" or "all"`; err == nil || !strings.HasSuffix(err.Error(), want) {
			t.Errorf("kind %q: error %v, want it to end %q", kind, err, want)
		}
	}
	// After a prefix, as the pipeline calls them.
	if got, err := ContextKey("tenant", ctxKey{})([]byte("rl:v1:"), withID(" \t ")); err == nil {
		t.Errorf("blank id after a prefix: got %q, want an error", got)
	}
	if got, err := ContextKey("tenant", ctxKey{})([]byte("rl:v1:"), withID("acme")); err != nil || string(got) != "rl:v1:tenant:acme" {
		t.Errorf("id after a prefix: %q, %v", got, err)
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
		strings.TrimSpace(w.Body.String()) != `{"error":"rate_limit_key_missing","missing":"l"}` {
		t.Fatalf("deny: %d calls=%d %v %s", w.Code, hs.calls, w.Header(), w.Body)
	}
	if c := hs.m.Counts()[0].Counts; c[admission.OutcomeKeyDenied] != 1 {
		t.Fatalf("counts = %v", c)
	}

	cfg.FallbackToIP = true
	var ev admission.Event
	cfg.Hook = func(e admission.Event) { ev = e }
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
	if d := hs.local(t).Classes().Class("l").AllowN(hs.m.LayerKey("ip:192.0.2.10", "g"), 0); d.Remaining != 0 {
		t.Fatalf("IP key Remaining = %d, want 0", d.Remaining)
	}
	// No IP either: denied, never let through.
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "@"
	w = httptest.NewRecorder()
	hs.h.ServeHTTP(w, r)
	if w.Code != http.StatusTooManyRequests || ev.Outcome != admission.OutcomeKeyDenied || !errors.Is(ev.Err, admission.ErrNoClientIP) {
		t.Fatalf("no key, no IP: %d %+v", w.Code, ev)
	}
}

// TestBadKeyFunc: a key function that ignores dst or returns nothing is a key
// failure, never a panic or an empty shared key.
func TestBadKeyFunc(t *testing.T) {
	for name, fn := range map[string]admission.KeyFunc[*http.Request]{
		"ignores dst":     func(dst []byte, r *http.Request) ([]byte, error) { return []byte("x"), nil },
		"appends nothing": func(dst []byte, r *http.Request) ([]byte, error) { return dst, nil },
		"nil":             func(dst []byte, r *http.Request) ([]byte, error) { return nil, nil },
	} {
		var ev admission.Event
		hs := newHarness(t, Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          fn,
			Hook:         func(e admission.Event) { ev = e },
		})
		if w := hs.do("/", ""); w.Code != http.StatusTooManyRequests || ev.Outcome != admission.OutcomeKeyDenied || !errors.Is(ev.Err, admission.ErrBadKeyFunc) {
			t.Errorf("%s: %d %+v", name, w.Code, ev)
		}
	}
}
