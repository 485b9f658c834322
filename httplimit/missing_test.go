package httplimit

import (
	"github.com/hotlimit/hotlimit/admission"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestMissingNamesLayer: a request refused for a missing identity says,
// over real HTTP, which layer's identity it lacks, by the layer's
// RateLimit item name in the body's "missing" (and Event.Missing,
// Denial.Missing): the group's limit without the token Config.Key reads,
// the identity layer's without the tenant its Key reads; never the
// identity itself. A request with both passes.
func TestMissingNamesLayer(t *testing.T) {
	var mu sync.Mutex // the hook runs on the server's goroutines
	var events []admission.Event
	var denials []Denial
	for _, custom := range []bool{false, true} {
		cfg := Config{
			Limits: map[string]hotlimit.Policy{
				"per-token":  hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
				"per-tenant": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
			},
			Groups:       []Group{{Name: "api", Limit: "per-token"}},
			DefaultGroup: "api",
			Key:          TokenKey("Authorization"),
			Identities:   []IdentityLimit{{Limit: "per-tenant", Key: TokenKey("X-Tenant")}},
			Hook: func(ev admission.Event) {
				mu.Lock()
				events = append(events, ev)
				mu.Unlock()
			},
		}
		if custom {
			cfg.Deny = func(w http.ResponseWriter, r *http.Request, d Denial) {
				mu.Lock()
				denials = append(denials, d)
				mu.Unlock()
				w.WriteHeader(d.Status)
			}
		}
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
		const tok, tenant = "secret-token-1", "acme-secret"
		for _, tc := range []struct {
			name    string
			headers []string
			want    string // the missing layer; "" for an admitted request
		}{
			{"no token", []string{"X-Tenant", tenant}, "per-token"},
			{"no tenant", []string{"Authorization", "Bearer " + tok}, "per-tenant"},
			{"neither", nil, "per-token"},
			{"both", []string{"Authorization", "Bearer " + tok, "X-Tenant", tenant}, ""},
		} {
			mu.Lock()
			events = events[:0]
			mu.Unlock()
			req, _ := http.NewRequest("GET", srv.URL+"/x", nil)
			for i := 0; i < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			mu.Lock()
			evs := append([]admission.Event(nil), events...)
			var den Denial
			if len(denials) > 0 {
				den = denials[len(denials)-1]
			}
			mu.Unlock()
			if len(evs) != 1 || evs[0].Missing != tc.want {
				t.Errorf("custom %v, %s: events %+v, want one with Missing %q", custom, tc.name, evs, tc.want)
			}
			if tc.want == "" {
				if resp.StatusCode != 200 {
					t.Errorf("custom %v, %s: %d %s, want 200", custom, tc.name, resp.StatusCode, body)
				}
				continue
			}
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "" {
				t.Errorf("custom %v, %s: %d Retry-After %q, want 429 without", custom, tc.name, resp.StatusCode, resp.Header.Get("Retry-After"))
			}
			if custom {
				if den.Missing != tc.want || den.Reason != "rate_limit_key_missing" {
					t.Errorf("custom, %s: Denial %+v, want Missing %q", tc.name, den, tc.want)
				}
				continue
			}
			if want := `{"error":"rate_limit_key_missing","missing":"` + tc.want + `"}` + "\n"; string(body) != want {
				t.Errorf("%s: body %q, want %q", tc.name, body, want)
			}
			if strings.Contains(string(body), tok) || strings.Contains(string(body), tenant) {
				t.Errorf("%s: the body shows an identity: %s", tc.name, body)
			}
		}
		srv.Close()
		m.Close()
	}
}
