package httplimit_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
)

const policiesToken = "hl_review_0a1b2c3d4e5f6789"

// refusedPolicies sends two requests of one client through a middleware whose
// group layer and global layer both hold one request an hour, in the
// given header mode, and returns the Denial.Policies its Config.Deny was
// handed for the second, refused, request (both layers are exhausted).
func refusedPolicies(t *testing.T, mode httplimit.HeaderMode) (int, []string) {
	t.Helper()
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	var got []string
	denied := 0
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"l":   hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
			"all": hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
		},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Global:       "all",
		Key:          httplimit.TokenKey("Authorization"),
		Headers:      mode,
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
		Deny: func(w http.ResponseWriter, r *http.Request, d httplimit.Denial) {
			denied++
			got = append([]string(nil), d.Policies...)
			w.WriteHeader(d.Status)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 2 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+policiesToken)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	return denied, got
}

// TestDenyPoliciesIndependentOfHeaderMode: Denial.Policies is
// documented as "the RateLimit item names of the limits that refused the
// request". A request that exhausted both its group layer and its global
// layer lists both with the default header mode, and must list both
// whatever Config.Headers says: the header mode chooses which fields are
// written, not which limits refused the request.
func TestDenyPoliciesIndependentOfHeaderMode(t *testing.T) {
	n, want := refusedPolicies(t, httplimit.HeadersIETF)
	if n != 1 || !reflect.DeepEqual(want, []string{"l", "all"}) {
		t.Fatalf("HeadersIETF: %d denials, Policies %q; want 1, [l all]", n, want)
	}
	for _, mode := range []httplimit.HeaderMode{httplimit.HeadersLegacy, httplimit.HeadersNone} {
		n, got := refusedPolicies(t, mode)
		if n != 1 || !reflect.DeepEqual(got, want) {
			t.Errorf("Headers %d: %d denials, Denial.Policies %q; want %q (as with HeadersIETF: both limits refused the request)", mode, n, got, want)
		}
	}
}

type fallbackTenantKey struct{}

// TestDenialLoggerFallbackOfIdentityLayer: a request whose Config.Key
// (the token) was found, refused by its group's limit, whose identity
// layer (its tenant missing, FallbackToIP) was keyed by the client IP:
// as DenialLogger documents, its line says id_fallback (a layer's key is
// the fallback's) while id_kind still describes Config.Key's identity.
func TestDenialLoggerFallbackOfIdentityLayer(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(time.Hour)
	var buf bytes.Buffer
	dl, err := httplimit.NewDenialLogger(slog.New(slog.NewJSONHandler(&buf, nil)),
		httplimit.DenialLogOptions{Instance: "api-1", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"l":      hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
			"tenant": hotlimit.FixedWindow{Limit: 100, Window: time.Hour},
		},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          httplimit.TokenKey("Authorization"),
		Identities:   []httplimit.IdentityLimit{{Limit: "tenant", Key: httplimit.ContextKey("tenant", fallbackTenantKey{}), FallbackToIP: true}},
		Hook:         dl.Hook,
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	codes := []int{}
	for range 2 {
		r := httptest.NewRequest("GET", "/", nil) // no tenant in the context
		r.Header.Set("Authorization", "Bearer "+policiesToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		codes = append(codes, w.Code)
	}
	if !reflect.DeepEqual(codes, []int{200, 429}) {
		t.Fatalf("statuses %v, want [200 429]", codes)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), buf.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line["id_kind"] != "tok" {
		t.Fatalf("id_kind %v, want tok (Config.Key found the token): %s", line["id_kind"], lines[0])
	}
	if line["id_fallback"] != true {
		t.Errorf("id_fallback = %v, want true: the tenant layer was keyed by the client IP\n%s", line["id_fallback"], lines[0])
	}
}
