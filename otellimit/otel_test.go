package otellimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

const rawToken = "hl_live_c4f1a09e7b23d58e" // must reach no attribute, nor its hash

// secrets are the strings no attribute value may contain: the tokens,
// their hashes as keys hold them, and the key format's prefix.
func secrets() []string {
	var out []string
	for _, tok := range []string{rawToken, rawToken + "-2"} {
		sum := sha256.Sum256([]byte(tok))
		out = append(out, tok, hex.EncodeToString(sum[:16]))
	}
	return append(out, "rl:v1", "Bearer")
}

// rig is the providers under test: a manual metric reader and a span
// recorder.
type rig struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	sr     *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newRig() *rig {
	r := &rig{reader: sdkmetric.NewManualReader(), sr: tracetest.NewSpanRecorder()}
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.sr))
	return r
}

// collect returns every data point as "name{k=v,...}" → value (a sum's
// value, a histogram's count), failing on any attribute that holds a
// secret.
func (r *rig) collect(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != scope {
			t.Errorf("scope %q, want %q", sm.Scope.Name, scope)
		}
		for _, m := range sm.Metrics {
			add := func(set attribute.Set, v int64) {
				checkAttrs(t, m.Name, set.ToSlice())
				out[m.Name+"{"+attrString(set.ToSlice())+"}"] += v
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, int64(p.Count))
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					add(p.Attributes, int64(p.Count))
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

func attrString(kvs []attribute.KeyValue) string {
	s := make([]string, len(kvs))
	for i, kv := range kvs {
		s[i] = string(kv.Key) + "=" + kv.Value.String()
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

func checkAttrs(t *testing.T, where string, kvs []attribute.KeyValue) {
	t.Helper()
	for _, kv := range kvs {
		for _, s := range secrets() {
			if strings.Contains(kv.Value.String(), s) {
				t.Errorf("%s: attribute %s = %q holds a secret", where, kv.Key, kv.Value.String())
			}
		}
	}
}

// switchable is a Local backend that fails while down is set.
type switchable struct {
	*admission.Local
	down *atomic.Bool
}

var errDown = errors.New("store down")

func (b switchable) AllowStates(ctx context.Context, ls []admission.Layer, st []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	if b.down.Load() {
		return hotlimit.Decision{}, -1, errDown
	}
	return b.Local.AllowStates(ctx, ls, st)
}

func switchableBackend(clock hotlimit.Clock, down *atomic.Bool) admission.BackendFactory {
	return func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		b, err := admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))(limits)
		l, _ := b.(*admission.Local)
		return switchable{l, down}, err
	}
}

// send serves one request under a recording parent span, as otelhttp
// would start it.
func send(rg *rig, h http.Handler, path, tok string) {
	ctx, span := rg.tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	r := httptest.NewRequest("GET", path, nil).WithContext(ctx)
	if tok != "" {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
}

// TestScriptedSequence drives two middlewares through every outcome
// (allowed, denied by the group and by the global layer, dry run, key
// failure, exempt, backend failure failing closed and under dry run)
// and checks every instrument's exact counts, every span and event, and
// that no attribute holds a token, its hash or a key.
func TestScriptedSequence(t *testing.T) {
	rg := newRig()
	clock := hotlimit.NewManualClock()
	downA, downB := new(atomic.Bool), new(atomic.Bool)
	obsA, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: SpansAll})
	if err != nil {
		t.Fatal(err)
	}
	var localA *admission.Local
	a, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
			"cheap":  hotlimit.TokenBucket{Rate: hotlimit.PerHour(100), Burst: 100},
			"global": hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
		},
		Groups: []httplimit.Group{
			{Name: "search", Patterns: []string{"/search"}, Limit: "search"},
			{Name: "cheap", Limit: "cheap"},
			{Name: "health", Patterns: []string{"/healthz"}, Exempt: true},
		},
		DefaultGroup: "cheap",
		Global:       "global",
		Key:          httplimit.TokenKey("Authorization"),
		Hook:         obsA.Hook,
		Backend: func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := switchableBackend(clock, downA)(limits)
			if b != nil {
				localA = b.(switchable).Local
			}
			return b, err
		},
		Observers: []admission.Observer{obsA},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	lims := map[string]*hotlimit.Limiter{}
	for _, name := range localA.Classes().Names() {
		lims[name] = localA.Classes().Class(name)
	}
	reg, err := ObserveLimiters(rg.mp, lims)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	obsB, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: SpansAll})
	if err != nil {
		t.Fatal(err)
	}
	b, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"dry": hotlimit.SlidingLog{Limit: 1, Window: time.Hour}},
		Groups:       []httplimit.Group{{Name: "dry", Limit: "dry"}},
		DefaultGroup: "dry",
		Key:          httplimit.TokenKey("Authorization"),
		DryRun:       true,
		Hook:         obsB.Hook,
		Backend:      switchableBackend(clock, downB),
		Observers:    []admission.Observer{obsB},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ha := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	hb := b.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	send(rg, ha, "/search", rawToken) // allowed; search 0 left, global 1
	send(rg, ha, "/search", rawToken) // denied by search
	send(rg, ha, "/other", rawToken)  // allowed; global 0 left, binding
	send(rg, ha, "/other", rawToken)  // denied by global; cheap refunded
	send(rg, ha, "/search", "")       // no key
	send(rg, ha, "/healthz", "")      // exempt
	downA.Store(true)
	send(rg, ha, "/search", rawToken+"-2") // backend down: 503
	send(rg, hb, "/x", rawToken)           // allowed
	send(rg, hb, "/x", rawToken)           // would be denied
	send(rg, hb, "/x", "")                 // no key: would be denied
	downB.Store(true)
	send(rg, hb, "/x", rawToken) // backend down: let through

	want := map[string]int64{
		"hotlimit.http.requests{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.outcome=allowed,hotlimit.route_group=search}":    1,
		"hotlimit.http.requests{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.outcome=denied,hotlimit.route_group=search}":     1,
		"hotlimit.http.requests{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.outcome=allowed,hotlimit.route_group=cheap}":     1,
		"hotlimit.http.requests{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.outcome=denied,hotlimit.route_group=cheap}":      1,
		"hotlimit.http.requests{hotlimit.outcome=key_denied,hotlimit.route_group=search}":                                                            1,
		"hotlimit.http.requests{hotlimit.outcome=exempt,hotlimit.route_group=health}":                                                                1,
		"hotlimit.http.requests{hotlimit.identity.kind=tok,hotlimit.outcome=error_denied,hotlimit.route_group=search}":                               1,
		"hotlimit.http.requests{hotlimit.algorithm=sliding_log,hotlimit.identity.kind=tok,hotlimit.outcome=allowed,hotlimit.route_group=dry}":        1,
		"hotlimit.http.requests{hotlimit.algorithm=sliding_log,hotlimit.identity.kind=tok,hotlimit.outcome=dry_run_denied,hotlimit.route_group=dry}": 1,
		"hotlimit.http.requests{hotlimit.outcome=dry_run_denied,hotlimit.route_group=dry}":                                                           1,
		"hotlimit.http.requests{hotlimit.identity.kind=tok,hotlimit.outcome=error_allowed,hotlimit.route_group=dry}":                                 1,

		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=allowed,hotlimit.limit=search}":                 1,
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=denied,hotlimit.limit=search}":                  1,
		"hotlimit.backend.duration{hotlimit.algorithm=token_bucket,hotlimit.backend.result=allowed,hotlimit.limit=cheap}":                  1,
		"hotlimit.backend.duration{hotlimit.algorithm=token_bucket,hotlimit.backend.result=denied,hotlimit.limit=cheap}":                   1,
		"hotlimit.backend.duration{error.type=_OTHER,hotlimit.algorithm=fixed_window,hotlimit.backend.result=error,hotlimit.limit=search}": 1,
		"hotlimit.backend.duration{hotlimit.algorithm=sliding_log,hotlimit.backend.result=allowed,hotlimit.limit=dry}":                     1,
		"hotlimit.backend.duration{hotlimit.algorithm=sliding_log,hotlimit.backend.result=denied,hotlimit.limit=dry}":                      1,
		"hotlimit.backend.duration{error.type=_OTHER,hotlimit.algorithm=sliding_log,hotlimit.backend.result=error,hotlimit.limit=dry}":     1,

		"hotlimit.backend.remaining{hotlimit.algorithm=fixed_window,hotlimit.limit=search}": 2,
		"hotlimit.backend.remaining{hotlimit.algorithm=fixed_window,hotlimit.limit=global}": 2,
		"hotlimit.backend.remaining{hotlimit.algorithm=sliding_log,hotlimit.limit=dry}":     2,

		"hotlimit.limiter.decisions{hotlimit.decision=allowed,hotlimit.limit=search}": 1,
		"hotlimit.limiter.decisions{hotlimit.decision=denied,hotlimit.limit=search}":  1,
		"hotlimit.limiter.decisions{hotlimit.decision=allowed,hotlimit.limit=cheap}":  2,
		"hotlimit.limiter.decisions{hotlimit.decision=denied,hotlimit.limit=cheap}":   0,
		"hotlimit.limiter.decisions{hotlimit.decision=allowed,hotlimit.limit=global}": 2,
		"hotlimit.limiter.decisions{hotlimit.decision=denied,hotlimit.limit=global}":  1,
		"hotlimit.limiter.refunds{hotlimit.limit=search}":                             0,
		"hotlimit.limiter.refunds{hotlimit.limit=cheap}":                              1,
		"hotlimit.limiter.refunds{hotlimit.limit=global}":                             0,
		"hotlimit.limiter.keys{hotlimit.limit=search}":                                1,
		"hotlimit.limiter.keys{hotlimit.limit=cheap}":                                 1,
		"hotlimit.limiter.keys{hotlimit.limit=global}":                                1,
		"hotlimit.limiter.swept{hotlimit.limit=search}":                               0,
		"hotlimit.limiter.swept{hotlimit.limit=cheap}":                                0,
		"hotlimit.limiter.swept{hotlimit.limit=global}":                               0,
		"hotlimit.limiter.evicted{hotlimit.limit=search}":                             0,
		"hotlimit.limiter.evicted{hotlimit.limit=cheap}":                              0,
		"hotlimit.limiter.evicted{hotlimit.limit=global}":                             0,
	}
	for _, name := range []string{"search", "cheap", "global"} {
		want["hotlimit.limiter.memory.usage{hotlimit.limit="+name+"}"] = int64(localA.Classes().Class(name).MemStats().Total)
	}
	got := rg.collect(t)
	compare(t, got, want)

	// Spans: one "hotlimit.decide" per backend call, a child of the
	// request's span; two failed.
	var decides, failed int
	events := 0
	for _, s := range rg.sr.Ended() {
		for _, kv := range s.Attributes() {
			checkAttrs(t, s.Name(), []attribute.KeyValue{kv})
		}
		for _, e := range s.Events() {
			checkAttrs(t, e.Name, e.Attributes)
			if e.Name == "hotlimit.decision" {
				events++
			}
		}
		switch s.Name() {
		case "hotlimit.decide":
			decides++
			if !s.Parent().IsValid() {
				t.Errorf("decide span without a parent")
			}
			if s.Status().Code == codes.Error {
				failed++
			}
			if s.SpanKind() != trace.SpanKindInternal {
				t.Errorf("span kind %v", s.SpanKind())
			}
		case "request":
		default:
			t.Errorf("unexpected span %q", s.Name())
		}
	}
	if decides != 8 || failed != 2 || events != 11 {
		t.Errorf("%d decide spans (%d failed), %d decision events; want 8 (2 failed), 11", decides, failed, events)
	}
}

func compare(t *testing.T, got, want map[string]int64) {
	t.Helper()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			w, ok := want[k]
			if !ok {
				t.Errorf("unexpected %s = %d", k, got[k])
			} else {
				t.Errorf("%s = %d, want %d", k, got[k], w)
			}
		}
	}
}
