package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// TestEveryoneKindReserved: no ContextKey can write Everyone's identity
// (kind "all"), so no client's own layer shares the server-wide budget.
// ExampleConfig_everyone checks the shared budget itself.
func TestEveryoneKindReserved(t *testing.T) {
	if ident.ValidKind("all") {
		t.Error(`ident.ValidKind("all"): a ContextKey of kind "all" could write Everyone's identity`)
	}
	id, err := admission.Everyone[*http.Request](nil, nil)
	if err != nil || string(id) != "all:*" {
		t.Errorf("Everyone: %q, %v; want all:*", id, err)
	}
	if _, err := httplimit.ContextKey("all", struct{}{})(nil, httptest.NewRequest("GET", "/", nil)); err == nil {
		t.Error(`ContextKey("all", ...) writes an identity`)
	}
}

// TestClientIPGivenOnce: behind a trusted proxy, Config.ClientIP alone
// (Key and the IdentityLimit's Key left nil) keys the request's layers by
// the client the proxy names, not by the proxy: two clients behind one
// proxy each get their own quota of 1, in the group's layer and in the
// identity layer.
func TestClientIPGivenOnce(t *testing.T) {
	c, err := admission.NewClientIP([]string{"10.0.0.0/8"}, "X-Forwarded-For", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, layer := range []string{"group", "identity"} {
		cfg := httplimit.Config{
			Limits: map[string]hotlimit.Policy{
				"per-ip": hotlimit.FixedWindow{Limit: 1, Window: time.Minute},
				"big":    hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
			},
			Groups:       []httplimit.Group{{Name: "all", Limit: "per-ip"}},
			DefaultGroup: "all",
			ClientIP:     c,
			Backend:      admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock())),
		}
		if layer == "identity" {
			cfg.Groups[0].Limit = "big"
			cfg.Key = httplimit.TokenKey("Authorization")
			cfg.Identities = []httplimit.IdentityLimit{{Limit: "per-ip"}}
		}
		m, err := httplimit.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for i, tc := range []struct {
			client string
			want   int
		}{{"203.0.113.1", 200}, {"203.0.113.2", 200}, {"203.0.113.1", 429}} {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = "10.0.0.1:4242"
			r.Header.Set("X-Forwarded-For", tc.client)
			r.Header.Set("Authorization", "Bearer shared-token")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("%s layer, request %d from %s: %d, want %d", layer, i+1, tc.client, w.Code, tc.want)
			}
		}
		m.Close()
	}
}
