package redislimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestCloseReleasesBackend: closing the middleware (or the pipeline
// grpclimit's interceptor closes) closes a RedisBackend in lease mode
// built by BackendFactory, so its limiters refuse with ErrClosed afterwards
// (their leases were given back), where a Close(ctx) method, which the
// pipeline did not know, left them admitting.
func TestCloseReleasesBackend(t *testing.T) {
	addr := redistest.Addr(t)
	limits := map[string]hotlimit.Policy{"api": hotlimit.FixedWindow{Limit: 100, Window: time.Hour}}
	capture := func(got **RedisBackend) admission.BackendFactory {
		factory := BackendFactory(redistest.Client(t, addr), WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second), WithLeases(0, 0))
		return func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := factory(limits)
			*got, _ = b.(*RedisBackend)
			return b, err
		}
	}
	check := func(t *testing.T, b *RedisBackend) {
		t.Helper()
		if b == nil {
			t.Fatal("the factory built no *RedisBackend")
		}
		d, err := b.limiters["api"].AllowN(context.Background(), "k", 1)
		if !errors.Is(err, ErrClosed) || d.Allowed {
			t.Fatalf("after Close: AllowN = %+v, %v; want a denial with ErrClosed", d, err)
		}
	}
	t.Run("httplimit", func(t *testing.T) {
		var b *RedisBackend
		mw, err := httplimit.New(httplimit.Config{
			Limits:       limits,
			Groups:       []httplimit.Group{{Name: "g", Limit: "api"}},
			DefaultGroup: "g",
			Key:          httplimit.TokenKey("Authorization"),
			Backend:      capture(&b),
		})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer client-0123456789abcdef")
		w := httptest.NewRecorder()
		mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("status %d; want 200", w.Code)
		}
		if err := mw.Close(); err != nil {
			t.Fatal(err)
		}
		check(t, b)
	})
	t.Run("pipeline", func(t *testing.T) {
		var b *RedisBackend
		p, err := admission.New(admission.Config[string]{
			Limits:  limits,
			Groups:  []admission.Group[string]{{Name: "g", Limit: "api"}},
			Key:     func(dst []byte, id string) ([]byte, error) { return append(dst, id...), nil },
			Backend: capture(&b),
		})
		if err != nil {
			t.Fatal(err)
		}
		res := p.Decide(context.Background(), "client", 0, 1)
		if res.Outcome != admission.OutcomeAllowed {
			t.Fatalf("outcome %v (%v); want allowed", res.Outcome, res.Err)
		}
		p.Release(res)
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		check(t, b)
	})
}
