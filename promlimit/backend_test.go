package promlimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// failing is a Local backend that fails while down is set.
type failing struct {
	*admission.Local
	down *atomic.Bool
}

func (b failing) AllowStates(ctx context.Context, ls []admission.Layer, st []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	if b.down.Load() {
		return hotlimit.Decision{}, -1, errors.New("store down")
	}
	return b.Local.AllowStates(ctx, ls, st)
}

// TestBackendMetrics: a scripted sequence (admitted, refused by the
// group, refused by the global layer, backend down under FailOpen) gives
// exact histogram counts, the remaining capacity of the binding limit,
// the failure policy's decisions in http_requests_total, and a Collector
// that still finds the Local behind the wrapper; alike whether the
// BackendMetrics observes the middleware's decisions (Config.Observers).
func TestBackendMetrics(t *testing.T) {
	down := new(atomic.Bool)
	bm := NewBackendMetrics(BackendOptions{})
	var local *admission.Local
	factory := func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		b, err := admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))(limits)
		local, _ = b.(*admission.Local)
		return failing{local, down}, err
	}
	observers := []admission.Observer{bm}
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.FixedWindow{Limit: 3, Window: time.Hour},
			"global": hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
		},
		Groups:       []httplimit.Group{{Name: "search", Limit: "search"}},
		DefaultGroup: "search",
		Global:       "global",
		Key:          httplimit.TokenKey("Authorization"),
		FailOpen:     true,
		Backend:      factory,
		Observers:    observers,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func() {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer t")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	send() // admitted: search 2 left, global 1: global binds (1)
	send() // admitted: search 1, global 0: global binds (0)
	send() // refused by global (search admits, is refunded): global binds (0)
	down.Store(true)
	send() // backend down: let through
	reg := prometheus.NewPedanticRegistry()
	lims := map[string]*hotlimit.Limiter{}
	for _, name := range local.Classes().Names() {
		lims[name] = local.Classes().Class(name) // the Collector sees a Local backend's only when it is the backend
	}
	reg.MustRegister(bm, New(Options{Middleware: m, Limiters: lims}))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			k := series(mf, mt)
			switch {
			case mt.Histogram != nil:
				got[k+" count"] = float64(mt.GetHistogram().GetSampleCount())
				if strings.HasSuffix(mf.GetName(), "remaining") {
					got[k+" sum"] = mt.GetHistogram().GetSampleSum()
				}
			case mt.Counter != nil:
				got[k] = mt.GetCounter().GetValue()
			}
		}
	}
	for k, want := range map[string]float64{
		"hotlimit_backend_duration_seconds,limit=search,result=allowed count": 2,
		"hotlimit_backend_duration_seconds,limit=search,result=denied count":  1,
		"hotlimit_backend_duration_seconds,limit=search,result=error count":   1,
		"hotlimit_backend_remaining,limit=global count":                       3,
		"hotlimit_backend_remaining,limit=global sum":                         1,
		"hotlimit_http_requests_total,group=search,outcome=error_allowed":     1,
		"hotlimit_http_requests_total,group=search,outcome=denied":            1,
		"hotlimit_limiter_refunds_total,limit=search":                         1,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestObserverAllocs: observing the middleware's decisions allocates
// nothing per request.
func TestObserverAllocs(t *testing.T) {
	build := func(obs []admission.Observer) http.Handler {
		m, err := httplimit.New(httplimit.Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Nanosecond}, Burst: 1 << 20}},
			Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          httplimit.TokenKey("Authorization"),
			Observers:    obs,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer t")
	w := httptest.NewRecorder()
	plain, observed := build(nil), build([]admission.Observer{NewBackendMetrics(BackendOptions{})})
	plain.ServeHTTP(w, r)
	observed.ServeHTTP(w, r)
	p := testing.AllocsPerRun(200, func() { plain.ServeHTTP(w, r) })
	o := testing.AllocsPerRun(200, func() { observed.ServeHTTP(w, r) })
	if o != p {
		t.Errorf("an observed request allocates %v times, an unobserved one %v", o, p)
	}
}

// TestBackendMetricsRetain: Retain deletes every series of the limits it
// does not keep (a configuration reload dropped them) and leaves the kept
// limits' counts as they were; a dropped limit observed again starts
// from zero.
func TestBackendMetricsRetain(t *testing.T) {
	bm := NewBackendMetrics(BackendOptions{})
	observe := func(limit string, o admission.Outcome) {
		bm.Observe(context.Background(), &admission.Event{Result: &admission.Result{Outcome: o, Binding: -1}, GroupLimit: limit, Duration: time.Microsecond})
	}
	for _, l := range []string{"kept", "kept", "dropped"} {
		observe(l, admission.OutcomeAllowed)
	}
	observe("dropped", admission.OutcomeDenied)
	observe("dropped", admission.OutcomeErrorDenied)
	counts := func() map[string]uint64 {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(bm)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				out[series(mf, mt)] = mt.GetHistogram().GetSampleCount()
			}
		}
		return out
	}
	if got := counts()["hotlimit_backend_duration_seconds,limit=dropped,result=denied"]; got != 1 {
		t.Fatalf("before Retain: dropped/denied counted %d, want 1 (%v)", got, counts())
	}
	if n := bm.Retain(func(l string) bool { return l == "kept" }); n != 1 {
		t.Errorf("Retain deleted %d limits, want 1", n)
	}
	got := counts()
	for k := range got {
		if strings.Contains(k, "limit=dropped") {
			t.Errorf("series %s stays after Retain dropped its limit", k)
		}
	}
	if got["hotlimit_backend_duration_seconds,limit=kept,result=allowed"] != 2 || got["hotlimit_backend_remaining,limit=kept"] != 2 {
		t.Errorf("the kept limit's counts changed: %v", got)
	}
	observe("dropped", admission.OutcomeAllowed)
	if got := counts()["hotlimit_backend_duration_seconds,limit=dropped,result=allowed"]; got != 1 {
		t.Errorf("observed again after Retain: dropped/allowed counted %d, want 1 (from zero, exported)", got)
	}
}
