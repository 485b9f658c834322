package redislimit

import (
	"context"
	"errors"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// The tests below give the limiters a timeout of 5s: the default 100ms
// is exceeded on a loaded machine, which would fail them for no fault.

// TestBackendResetThroughMiddleware: httplimit's Middleware.Reset, on the
// Redis backend, unblocks a drained client: its cached denial goes (the
// request after it is not answered locally) and so does its state in
// Redis (the request is admitted). Another client stays drained.
func TestBackendResetThroughMiddleware(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var sent redistest.Counter
	c.AddHook(&sent)
	var rb *RedisBackend
	m, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 2}},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          httplimit.TokenKey("Authorization"),
		Backend: func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := NewBackend(c, limits, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second), WithLocalDenials(100))
			rb = b
			return b, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	do := func(token string) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, tok := range []string{"token-a-0123456789", "token-b-0123456789"} {
		for i, want := range []int{200, 200, 429} {
			if got := do(tok); got != want {
				t.Fatalf("client %s, request %d: %d, want %d", tok, i, got, want)
			}
		}
	}
	before := sent.N()
	if got := do("token-a-0123456789"); got != 429 || sent.N() != before {
		t.Fatalf("drained client: %d, %d commands; want 429 from the cached denial", got, sent.N()-before)
	}
	if err := m.Reset(context.Background(), httplimit.TokenIdentity("token-a-0123456789")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{200, 200, 429} {
		if got := do("token-a-0123456789"); got != want {
			t.Fatalf("after Reset, request %d: %d, want %d", i, got, want)
		}
	}
	if got := do("token-b-0123456789"); got != 429 {
		t.Fatalf("the other client after a's Reset: %d, want 429", got)
	}
	if err := rb.Reset(context.Background(), "nope", "k"); !errors.Is(err, admission.ErrUnknownLimit) {
		t.Fatalf("Reset of an unknown limit: %v", err)
	}
	if err := rb.Reset(context.Background(), "l", strings.Repeat("k", hotlimit.MaxKeyLen+1)); !errors.Is(err, hotlimit.ErrKeyTooLong) {
		t.Fatalf("Reset of a key over MaxKeyLen: %v", err)
	}
}

// TestBackendResetLayered: resetting one layer's key drops the cached
// denial of a layered call that waited on it, though another layer (which
// denied first, and holds the entry) was not reset: the next call reports
// that layer's own wait, not the reset layer's.
func TestBackendResetLayered(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	rb := must(NewBackend(c, map[string]hotlimit.Policy{
		"hour": hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1},
		"day":  hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 24 * time.Hour}, Burst: 1},
	}, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second), WithLocalDenials(100)))
	ctx := context.Background()
	ls := []admission.Layer{{Limit: "hour", Key: "h", Cost: 1}, {Limit: "day", Key: "d", Cost: 1}}
	if d := must(allow(ctx, rb, ls)); !d.Allowed {
		t.Fatalf("first call: %+v", d)
	}
	// Both layers deny; "hour" denies first and caches the call's
	// denial, which waits on "day".
	if d, i, err := rb.AllowStates(ctx, ls, nil); err != nil || d.Allowed || i != 1 || d.RetryAfter <= time.Hour {
		t.Fatalf("drained: %+v, binding %d, %v; want day's wait", d, i, err)
	}
	if err := rb.Reset(ctx, "day", "d"); err != nil {
		t.Fatal(err)
	}
	d, i, err := rb.AllowStates(ctx, ls, nil)
	if err != nil || d.Allowed || i != 0 || d.RetryAfter > time.Hour {
		t.Fatalf("after day's Reset: %+v, binding %d, %v; want hour's own wait (at most 1h)", d, i, err)
	}
}

// TestBackendStatesThroughMiddleware: with the Redis backend, the
// RateLimit field has one item per limit, each with its own r and t (a
// bucket's next token, a sliding log's oldest unit), as with Local.
func TestBackendStatesThroughMiddleware(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"g":   hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3},
			"all": hotlimit.SlidingLog{Limit: 2, Window: time.Minute},
		},
		Groups:       []httplimit.Group{{Name: "g", Limit: "g"}},
		DefaultGroup: "g",
		Global:       "all",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      BackendFactory(c, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second)),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer token-0123456789")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if got, want := w.Header().Get("RateLimit"), `"g";r=2;t=3600, "all";r=1;t=60`; w.Code != 200 || got != want {
		t.Fatalf("%d, RateLimit %q; want 200, %q", w.Code, got, want)
	}
}

// TestBackendStatesUnknown: when a cached denial answers, the backend
// cannot tell the layers' states, and says so (Remaining -1); Redis's
// own answer reports them.
func TestBackendStatesUnknown(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	rb := must(NewBackend(c, map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
		WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second), WithLocalDenials(10)))
	ctx := context.Background()
	ls := []admission.Layer{{Limit: "l", Key: "k", Cost: 1}}
	states := make([]hotlimit.LayerState, 1)
	for i, want := range []int64{0, 0, -1} { // admitted, denied by Redis, denied from the cache
		d, _, err := rb.AllowStates(ctx, ls, states)
		if err != nil || d.Allowed != (i == 0) || states[0].Decision.Remaining != want || want == 0 && states[0].Next <= 0 {
			t.Fatalf("call %d: %+v, %v, state %+v; want Remaining %d", i, d, err, states[0], want)
		}
	}
}

// TestBackendStatesLength: AllowStates given a states slice shorter or
// longer than its layers (a caller's reusable buffer) does not panic: the
// layers states has room for get their states, the elements beyond the
// layers are unknown (Remaining -1), and the decision is the same.
func TestBackendStatesLength(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	rb := must(NewBackend(c, map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Hour}},
		WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second)))
	ctx := context.Background()
	for _, n := range []int{1, 2, 5, 9} {
		ls := make([]admission.Layer, 3)
		for i := range ls {
			ls[i] = admission.Layer{Limit: "l", Key: fmt.Sprint("k", n, i), Cost: int64(i + 1)}
		}
		states := make([]hotlimit.LayerState, n)
		for i := range states {
			states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: 77}}
		}
		d, _, err := rb.AllowStates(ctx, ls, states)
		if err != nil || !d.Allowed {
			t.Fatalf("%d states: %+v, %v", n, d, err)
		}
		for i, st := range states {
			if want := int64(-1); i < len(ls) {
				want = 5 - int64(i+1)
				if st.Decision.Remaining != want {
					t.Fatalf("%d states: states[%d] = %+v; want Remaining %d", n, i, st, want)
				}
			} else if st.Decision.Remaining != want {
				t.Fatalf("%d states: states[%d] = %+v; want Remaining %d", n, i, st, want)
			}
		}
	}
}
