package httplimit

import (
	"context"
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
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
		cfg.Backend = admission.LocalBackend(hotlimit.WithClock(hs.clock), hotlimit.WithSweepInterval(0))
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

// newLocal is the *admission.Local admission.LocalBackend(opts...) builds
// for limits.
func newLocal(limits map[string]hotlimit.Policy, opts ...hotlimit.Option) (*admission.Local, error) {
	b, err := admission.LocalBackend(opts...)(limits)
	l, _ := b.(*admission.Local)
	return l, err
}

func (hs *harness) local(t *testing.T) *admission.Local {
	t.Helper()
	l, ok := hs.m.Backend().(*admission.Local)
	if !ok {
		t.Fatalf("backend is %T, not *admission.Local", hs.m.Backend())
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

// rlItem is one RateLimit item; t is -1 when absent.
type rlItem struct {
	name string
	r, t int64
}

// parseRateLimitItems parses a RateLimit value of one or more items
// `"name";r=R;t=T`, and fails the test unless the names are distinct.
func parseRateLimitItems(t *testing.T, v string) map[string]rlItem {
	t.Helper()
	out := map[string]rlItem{}
	for _, part := range strings.Split(v, ", ") {
		name, r, tt := parseRateLimit(t, part)
		if _, dup := out[name]; dup {
			t.Fatalf("RateLimit %q: two items named %q", v, name)
		}
		out[name] = rlItem{name, r, tt}
	}
	return out
}

func ceilSec(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }

// backendFunc is an admission.Backend that decides with f, and can tell neither
// the binding layer nor the layers' states.
type backendFunc func(context.Context, []admission.Layer) (hotlimit.Decision, error)

func (f backendFunc) AllowStates(ctx context.Context, ls []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	unknown(states)
	d, err := f(ctx, ls)
	return d, -1, err
}

func (f backendFunc) Reset(context.Context, string, string) error { return nil }

func (f backendFunc) Close() error { return nil }

// unknown marks every state as one the backend cannot tell.
func unknown(states []hotlimit.LayerState) {
	for i := range states {
		states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
	}
}

// plainBackend is admission.Local as an admission.Backend that can tell neither the binding
// layer nor the layers' states.
type plainBackend struct{ *admission.Local }

func (p plainBackend) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	unknown(states)
	d, _, err := p.Local.AllowStates(ctx, layers, nil)
	return d, -1, err
}

// fixedCost is a CostFunc pricing every request at c: unlike a fixed
// Group.Cost, it may exceed the limit's capacity (New refuses such a Cost).
func fixedCost(c int64) func(*http.Request) (int64, error) {
	return func(*http.Request) (int64, error) { return c, nil }
}
