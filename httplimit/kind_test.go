package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
)

type tenantKey struct{}

// TestEventIdentityKind: each admission.KeyFunc[*http.Request]'s kind reaches Event.IdentityKind,
// the fallback to the client IP reports "ip", a key failure "", and a
// admission.KeyFunc[*http.Request] that makes up kinds is capped at 32 distinct ones.
func TestEventIdentityKind(t *testing.T) {
	var last admission.Event
	mk := func(key admission.KeyFunc[*http.Request], fallbackToIP bool) http.Handler {
		m, err := httplimit.New(httplimit.Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}},
			Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          key,
			FallbackToIP: fallbackToIP,
			Hook:         func(ev admission.Event) { last = ev },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	}
	send := func(h http.Handler, r *http.Request) string {
		last = admission.Event{IdentityKind: "unset"}
		h.ServeHTTP(httptest.NewRecorder(), r)
		return last.IdentityKind
	}
	req := func(tok, tenant string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		if tenant != "" {
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
		}
		return r
	}
	tok := mk(httplimit.TokenKey("Authorization"), false)
	if k := send(tok, req("secret", "")); k != "tok" {
		t.Errorf("TokenKey: kind %q, want tok", k)
	}
	if k := send(tok, req("", "")); k != "" {
		t.Errorf("key failure: kind %q, want empty", k)
	}
	fb := mk(httplimit.TokenKey("Authorization"), true)
	if k := send(fb, req("", "")); k != "ip" {
		t.Errorf("fallback to the client IP: kind %q, want ip", k)
	}
	ip := mk(httplimit.IPKey(nil), false)
	if k := send(ip, req("", "")); k != "ip" {
		t.Errorf("IPKey: kind %q, want ip", k)
	}
	ctx := mk(httplimit.ContextKey("tenant", tenantKey{}), false)
	if k := send(ctx, req("", "acme")); k != "tenant" {
		t.Errorf("ContextKey: kind %q, want tenant", k)
	}

	n := 0
	wild := mk(func(dst []byte, r *http.Request) ([]byte, error) {
		n++
		return append(dst, "k"+strconv.Itoa(n)+":v"...), nil
	}, false)
	for i := 1; i <= 40; i++ {
		want := "k" + strconv.Itoa(i)
		if i > 32 {
			want = "other"
		}
		if k := send(wild, req("", "")); k != want {
			t.Fatalf("made-up kind %d: %q, want %q", i, k, want)
		}
	}
	// A kind already seen costs no allocation: a request allocates as
	// much with the hook as without.
	m, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1000, Window: time.Hour}},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          httplimit.TokenKey("Authorization"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	noHook := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := req("secret", "")
	w := httptest.NewRecorder()
	with := testing.AllocsPerRun(50, func() { tok.ServeHTTP(w, r) })
	without := testing.AllocsPerRun(50, func() { noHook.ServeHTTP(w, r) })
	if with != without {
		t.Errorf("a request allocates %v times with a hook, %v without", with, without)
	}
}
