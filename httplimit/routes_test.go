package httplimit

import (
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

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
	if c[0].Group != "search" || c[0].Counts[admission.OutcomeAllowed] != 3 || c[0].Counts[admission.OutcomeDenied] != 3 || c[1].Counts[admission.OutcomeAllowed] != 1 {
		t.Fatalf("Counts = %+v", c)
	}
}

func TestExemptions(t *testing.T) {
	var outs []admission.Outcome
	hs := newHarness(t, Config{
		Limits: map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
		Groups: []Group{
			{Name: "health", Patterns: []string{"/healthz"}, Exempt: true},
			{Name: "api", Limit: "l"},
		},
		DefaultGroup:     "api",
		Key:              TokenKey("Authorization"),
		ExemptIdentities: []string{tokenIdentity(t, "internal-batch")},
		Hook:             func(e admission.Event) { outs = append(outs, e.Outcome) },
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
	if c[0].Counts[admission.OutcomeExempt] != 3 || c[1].Counts[admission.OutcomeExempt] != 3 || c[1].Counts[admission.OutcomeDenied] != 2 || len(outs) != 9 {
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
