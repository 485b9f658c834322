package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// TestIdentitiesOneDecision: a per-token limit (the group's) and a per-IP
// limit (Config.Identities) decide each request together: every response,
// 200 and 429 alike, carries one RateLimit item for each, with its own r
// and t, and RateLimit-Policy one item for each; a request the per-IP
// limit refuses consumes nothing of the token's quota, and the other way
// round.
func TestIdentitiesOneDecision(t *testing.T) {
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{
			"per-token": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
			"per-ip":    hotlimit.FixedWindow{Limit: 3, Window: 30 * time.Second},
		},
		Groups:       []Group{{Name: "all", Limit: "per-token"}},
		DefaultGroup: "all",
		Key:          TokenKey("Authorization"),
		Identities:   []IdentityLimit{{Limit: "per-ip", Key: IPKey(nil)}},
	})
	from := func(ip, tok string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = ip + ":5555"
		r.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		hs.h.ServeHTTP(w, r)
		return w
	}
	type want struct {
		code         int
		tokR, ipR    int64
		tokT, ipT    int64
		retryAfter   string
		calledBefore int
	}
	// The clock is at 1000 s: the token's window ends in 20 s, the IP's
	// in 20 s too (1020 = 34·30).
	for i, st := range []struct {
		ip, tok string
		want
	}{
		{"192.0.2.1", "a", want{200, 4, 2, 20, 20, "", 0}},
		{"192.0.2.1", "a", want{200, 3, 1, 20, 20, "", 1}},
		{"192.0.2.1", "a", want{200, 2, 0, 20, 20, "", 2}},
		{"192.0.2.1", "a", want{429, 2, 0, 20, 20, "20", 3}}, // the IP refuses: the token keeps its 2
		{"192.0.2.2", "a", want{200, 1, 2, 20, 20, "", 3}},   // another IP, same token
		{"192.0.2.2", "a", want{200, 0, 1, 20, 20, "", 4}},
		{"192.0.2.2", "a", want{429, 0, 1, 20, 20, "20", 5}}, // the token refuses: the IP keeps its 1
		{"192.0.2.2", "b", want{200, 4, 0, 20, 20, "", 5}},   // another token on that IP
	} {
		w := from(st.ip, st.tok)
		h := w.Header()
		if w.Code != st.code || hs.calls != st.calledBefore+btoi(st.code == 200) || h.Get("Retry-After") != st.retryAfter {
			t.Fatalf("request %d: status %d, handler calls %d, Retry-After %q; want %d, %d, %q", i, w.Code, hs.calls, h.Get("Retry-After"), st.code, st.calledBefore+btoi(st.code == 200), st.retryAfter)
		}
		checkRateLimitFields(t, h)
		if got, want := h.Get("RateLimit-Policy"), `"per-token";q=5;w=60, "per-ip";q=3;w=30`; got != want {
			t.Errorf("request %d: RateLimit-Policy %q, want %q", i, got, want)
		}
		items := parseRateLimitItems(t, h.Get("RateLimit"))
		tok, ip := items["per-token"], items["per-ip"]
		if len(items) != 2 || tok.r != st.tokR || ip.r != st.ipR || tok.t != st.tokT || ip.t != st.ipT {
			t.Errorf("request %d: RateLimit %q, want per-token r=%d t=%d and per-ip r=%d t=%d", i, h.Get("RateLimit"), st.tokR, st.tokT, st.ipR, st.ipT)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestByIPAndToken: the one-line start grows into several identities:
// By(PerIP, PerToken) checks both on every request, with an item for each
// on every response, and refuses with 429 when either is spent.
func TestByIPAndToken(t *testing.T) {
	m, err := By(PerIP(hotlimit.PerMinute(3)), PerToken("Authorization", hotlimit.PerMinute(100)))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for i := range 4 {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = "192.0.2.7:5555"
		r.Header.Set("Authorization", "Bearer tok-"+string(rune('a'+i))) // a new token each time: the IP binds
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		want := http.StatusOK
		if i == 3 {
			want = http.StatusTooManyRequests
		}
		if w.Code != want {
			t.Fatalf("request %d: status %d, want %d", i, w.Code, want)
		}
		items := parseRateLimitItems(t, w.Header().Get("RateLimit"))
		if len(items) != 2 || items["per-ip"].name == "" || items["per-token"].name == "" {
			t.Errorf("request %d: RateLimit %q, want a per-ip and a per-token item", i, w.Header().Get("RateLimit"))
		}
		if ip := items["per-ip"].r; ip != max(0, int64(2-i)) {
			t.Errorf("request %d: per-ip r=%d", i, ip)
		}
	}
	for _, bad := range [][]PerIdentityLimit{nil, {PerIP(hotlimit.PerMinute(1)), PerIP(hotlimit.PerMinute(2))}, {{}}} {
		if m, err := By(bad...); err == nil {
			m.Close()
			t.Errorf("By(%d limits, duplicate or zero) did not fail", len(bad))
		}
	}
}

// TestIdentitiesConfigErrors: an identity layer needs a limit of its own,
// a key, and a cost its limit can hold.
func TestIdentitiesConfigErrors(t *testing.T) {
	base := func() Config {
		return Config{
			Limits: map[string]hotlimit.Policy{
				"g":  hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
				"ip": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
			},
			Groups:       []Group{{Name: "all", Limit: "g"}},
			DefaultGroup: "all",
			Key:          TokenKey("Authorization"),
			Identities:   []IdentityLimit{{Limit: "ip", Key: IPKey(nil)}},
		}
	}
	for _, tc := range []struct {
		want string
		edit func(*Config)
	}{
		{`Identities[0]: Limit "g" is used by another layer`, func(c *Config) { c.Identities[0].Limit = "g" }},
		{`Identities[0]: Limit "x" is not in Config.Limits`, func(c *Config) { c.Identities[0].Limit = "x" }},
		{`Identities[0]: Cost 4 is above limit "ip"'s capacity 3`, func(c *Config) { c.Identities[0].Cost = 4 }},
		{`Config.Identities has 7 layers, at most 6`, func(c *Config) {
			for i := range 6 {
				name := "x" + string(rune('0'+i))
				c.Limits[name] = hotlimit.FixedWindow{Limit: 1, Window: time.Minute}
				c.Identities = append(c.Identities, IdentityLimit{Limit: name, Key: IPKey(nil)})
			}
		}},
	} {
		cfg := base()
		tc.edit(&cfg)
		m, err := New(cfg)
		if err == nil {
			m.Close()
			t.Errorf("want %q, got no error", tc.want)
			continue
		}
		if got := err.Error(); !strings.Contains(got, tc.want) || !strings.HasPrefix(got, "httplimit: ") {
			t.Errorf("error %q, want %q", got, tc.want)
		}
	}
}

// TestIdentitiesBadKeyFunc: an identity layer's admission.KeyFunc[*http.Request] that ignores its
// dst (returns a buffer of its own, or nothing) refuses the request as a
// key failure: it neither panics nor replaces the keys built before it.
func TestIdentitiesBadKeyFunc(t *testing.T) {
	for name, fn := range map[string]admission.KeyFunc[*http.Request]{
		"ignores dst": func(dst []byte, r *http.Request) ([]byte, error) { return []byte("x"), nil },
		"own prefix": func(dst []byte, r *http.Request) ([]byte, error) {
			return []byte("rl:v1:ip:192.0.2.1:route:all-of-it"), nil
		},
		"appends nothing": func(dst []byte, r *http.Request) ([]byte, error) { return dst, nil },
		"nil":             func(dst []byte, r *http.Request) ([]byte, error) { return nil, nil },
	} {
		var ev admission.Event
		hs := newHarness(t, Config{
			Limits: map[string]hotlimit.Policy{
				"g":  hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
				"id": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
			},
			Groups:       []Group{{Name: "all", Limit: "g"}},
			DefaultGroup: "all",
			Key:          TokenKey("Authorization"),
			Identities:   []IdentityLimit{{Limit: "id", Key: fn}},
			Hook:         func(e admission.Event) { ev = e },
		})
		if w := hs.do("/", token); w.Code != http.StatusTooManyRequests || ev.Outcome != admission.OutcomeKeyDenied || !errors.Is(ev.Err, admission.ErrBadKeyFunc) {
			t.Errorf("%s: %d %+v", name, w.Code, ev)
		}
	}
}

// TestIdentityFallbackToIP: an IdentityLimit with FallbackToIP keys its
// layer by the client IP when its Key finds no identity (one quota per IP,
// Event.Fallback set); without it the request is refused, naming the
// layer.
func TestIdentityFallbackToIP(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		var ev admission.Event
		hs := newHarness(t, Config{
			Limits: map[string]hotlimit.Policy{
				"per-token":  hotlimit.FixedWindow{Limit: 10, Window: time.Minute},
				"per-tenant": hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
			},
			Groups:       []Group{{Name: "all", Limit: "per-token"}},
			DefaultGroup: "all",
			Key:          TokenKey("Authorization"),
			Identities:   []IdentityLimit{{Limit: "per-tenant", Key: TokenKey("X-Tenant"), FallbackToIP: fallback}},
			Hook:         func(e admission.Event) { ev = e },
		})
		from := func(ip string) int {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = ip + ":5555"
			r.Header.Set("Authorization", "Bearer "+token) // no X-Tenant
			w := httptest.NewRecorder()
			hs.h.ServeHTTP(w, r)
			return w.Code
		}
		if !fallback {
			if code := from("192.0.2.1"); code != http.StatusTooManyRequests || ev.Outcome != admission.OutcomeKeyDenied || ev.Missing != "per-tenant" {
				t.Errorf("without FallbackToIP: %d %v missing %q, want 429 key_denied missing per-tenant", code, ev.Outcome, ev.Missing)
			}
			continue
		}
		var got []int
		for _, ip := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.1", "192.0.2.2"} {
			got = append(got, from(ip))
			if !ev.Fallback {
				t.Errorf("request %d: Event.Fallback false", len(got))
			}
		}
		// Two per IP: the third from .1 is refused, .2 has its own quota.
		if want := []int{200, 200, 429, 200}; !slices.Equal(got, want) {
			t.Errorf("FallbackToIP: statuses %v, want %v", got, want)
		}
	}
}
