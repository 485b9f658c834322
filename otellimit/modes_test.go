package otellimit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"go.opentelemetry.io/otel/attribute"
)

// TestSpanModes: the default adds an event to the request's span and
// starts no span; SpansOff does neither; the event says what the
// middleware did.
func TestSpanModes(t *testing.T) {
	for _, c := range []struct {
		mode            Spans
		decides, events int
	}{{SpanEvents, 0, 2}, {SpansAll, 2, 2}, {SpansOff, 0, 0}} {
		rg := newRig()
		obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: c.mode})
		if err != nil {
			t.Fatal(err)
		}
		m, err := httplimit.New(httplimit.Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
			Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          httplimit.TokenKey("Authorization"),
			Hook:         obs.Hook,
			Observers:    []admission.Observer{obs},
		})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		send(rg, h, "/", rawToken)
		send(rg, h, "/", rawToken)
		m.Close()
		decides, events := 0, 0
		var last []attribute.KeyValue
		for _, s := range rg.sr.Ended() {
			if s.Name() == "hotlimit.decide" {
				decides++
			}
			for _, e := range s.Events() {
				events++
				last = e.Attributes
			}
		}
		if decides != c.decides || events != c.events {
			t.Errorf("mode %d: %d decide spans, %d events; want %d, %d", c.mode, decides, events, c.decides, c.events)
		}
		if c.events > 0 {
			got := attrString(last)
			want := "hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.limit=l,hotlimit.outcome=denied,hotlimit.route_group=g"
			if got != want {
				t.Errorf("mode %d: last event %s, want %s", c.mode, got, want)
			}
		}
	}
}

// TestBackendKeepsBinding: observed, the backend reports the binding
// layer as it does unobserved, so the RateLimit header names the global
// layer when it binds; and ObserveMiddleware registers nothing for a
// backend that is not a Local.
func TestBackendKeepsBinding(t *testing.T) {
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"g":      hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
			"global": hotlimit.FixedWindow{Limit: 5, Window: time.Hour}, // same capacity: only the index tells them apart
		},
		Groups:       []httplimit.Group{{Name: "g", Limit: "g"}},
		DefaultGroup: "g",
		Global:       "global",
		GlobalCost:   2,
		Key:          httplimit.TokenKey("Authorization"),
		Observers:    []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+rawToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if rl := w.Header().Get("RateLimit"); !strings.HasPrefix(rl, `"g";r=4;`) || !strings.Contains(rl, `, "global";r=3;`) {
		t.Errorf("RateLimit %q: want one item per layer, as the unwrapped Local gives", rl)
	}
	if err := m.Reset(context.Background(), "tok:nobody"); err != nil {
		t.Errorf("Reset: %v", err)
	}
	other, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          httplimit.TokenKey("Authorization"),
		Backend: func(map[string]hotlimit.Policy) (admission.Backend, error) {
			return plainBackend{}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	rg2 := newRig()
	reg, err := ObserveMiddleware(rg2.mp, other)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if got := rg2.collect(t); len(got) != 0 {
		t.Errorf("a non-Local backend exported %v", got)
	}
}

type plainBackend struct{}

func (plainBackend) AllowStates(_ context.Context, _ []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for i := range states {
		states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
	}
	return hotlimit.Decision{Allowed: true}, -1, nil
}

func (plainBackend) Reset(context.Context, string, string) error { return nil }

func (plainBackend) Close() error { return nil }

// TestHookConcurrent: concurrent requests through the hook, each
// goroutine with its own group and outcome sequence, give exact counts
// (the attribute cache is built concurrently).
func TestHookConcurrent(t *testing.T) {
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := []admission.Outcome{admission.OutcomeAllowed, admission.OutcomeDenied, admission.OutcomeKeyDenied}
	const workers, each = 4, 300
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				obs.Hook(admission.Event{Group: fmt.Sprint("g", w%2), Outcome: outcomes[i%3], IdentityKind: "tok", Algorithm: "FixedWindow"})
			}
		})
	}
	wg.Wait()
	got := rg.collect(t)
	total := int64(0)
	for k, v := range got {
		if v != workers/2*each/3 {
			t.Errorf("%s = %d, want %d", k, v, workers/2*each/3)
		}
		total += v
	}
	if len(got) != 6 || total != workers*each {
		t.Errorf("%d series totalling %d, want 6 totalling %d", len(got), total, workers*each)
	}
}

type tenantCtx struct{}

// TestTenant: Options.Tenant labels the request counter, up to
// MaxTenants names, then "_OTHER"; a name that is not printable ASCII is
// "_OTHER" too.
func TestTenant(t *testing.T) {
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, MaxTenants: 2,
		Tenant: func(ctx context.Context) string { s, _ := ctx.Value(tenantCtx{}).(string); return s }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "acme", "globex", "initech", "", "bad name"} {
		ctx := context.WithValue(context.Background(), tenantCtx{}, tenant)
		obs.Hook(admission.Event{Context: ctx, Group: "g", Outcome: admission.OutcomeDenied})
	}
	compare(t, rg.collect(t), map[string]int64{
		"hotlimit.http.requests{hotlimit.outcome=denied,hotlimit.route_group=g,hotlimit.tenant=acme}":   2,
		"hotlimit.http.requests{hotlimit.outcome=denied,hotlimit.route_group=g,hotlimit.tenant=globex}": 1,
		"hotlimit.http.requests{hotlimit.outcome=denied,hotlimit.route_group=g,hotlimit.tenant=_OTHER}": 2,
		"hotlimit.http.requests{hotlimit.outcome=denied,hotlimit.route_group=g}":                        1,
	})
}

// TestBadInput: nil arguments are errors or no-ops, never panics.
func TestBadInput(t *testing.T) {
	if _, err := ObserveMiddleware(nil, nil); err == nil {
		t.Error("ObserveMiddleware(nil) succeeded")
	}
	reg, err := ObserveLimiters(newRig().mp, map[string]*hotlimit.Limiter{"nil": nil})
	if err != nil {
		t.Fatal(err)
	}
	reg.Unregister()
	h, err := New(Options{}) // the global providers
	if err != nil {
		t.Fatal(err)
	}
	h.Hook(admission.Event{}) // no request, no group
}
