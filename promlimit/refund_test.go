package promlimit

import (
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterWatch gathers a registry as Prometheus scrapes it and reports
// any counter series below its value in an earlier gather. It is safe
// for concurrent use.
type counterWatch struct {
	t    testing.TB
	reg  *prometheus.Registry
	mu   sync.Mutex
	last map[string]float64
	errs int
}

func newCounterWatch(t testing.TB, reg *prometheus.Registry) *counterWatch {
	return &counterWatch{t: t, reg: reg, last: map[string]float64{}}
}

// series names one series: metric name and its labels.
func series(mf *dto.MetricFamily, m *dto.Metric) string {
	var b strings.Builder
	b.WriteString(mf.GetName())
	for _, lp := range m.GetLabel() {
		b.WriteString("," + lp.GetName() + "=" + lp.GetValue())
	}
	return b.String()
}

// scrape gathers and checks; it returns the counters it read.
func (w *counterWatch) scrape(when string) map[string]float64 {
	w.mu.Lock() // across Gather: scrapes are ordered as they are compared
	defer w.mu.Unlock()
	mfs, err := w.reg.Gather()
	if err != nil {
		w.t.Error(err)
		return nil
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_COUNTER {
			continue
		}
		for _, m := range mf.GetMetric() {
			k, v := series(mf, m), m.GetCounter().GetValue()
			got[k] = v
			if v < w.last[k] && w.errs < 5 {
				w.errs++
				w.t.Errorf("%s: %s went down from %v to %v", when, k, w.last[k], v)
			}
			w.last[k] = max(w.last[k], v)
		}
	}
	return got
}

// TestCountersMonotonicUnderRefunds scrapes the registry while the
// middleware's global layer refuses requests that the group layer
// admitted (so the group layer's admission is given back): inside the
// global limiter's deny hook, where the refund is about to happen, and
// from concurrent scrapers. No counter may go down, and the final values
// are exact.
func TestCountersMonotonicUnderRefunds(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	var w *counterWatch
	hook := hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) { w.scrape("in the deny hook") })
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"group":  hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour},
			"global": hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
		},
		Groups:       []httplimit.Group{{Name: "g", Limit: "group"}},
		DefaultGroup: "g",
		Global:       "global",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0), hook),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reg.MustRegister(New(Options{Middleware: m}))
	w = newCounterWatch(t, reg)
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	const workers, each = 2, 200
	var wg, scrapers sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		scrapers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					w.scrape("concurrent scrape")
				}
			}
		})
	}
	for i := range workers {
		wg.Go(func() {
			r := httptest.NewRequest("GET", "/", nil)
			r.Header.Set("Authorization", "Bearer t"+strconv.Itoa(i))
			for range each {
				h.ServeHTTP(httptest.NewRecorder(), r)
				w.scrape("after a request")
			}
		})
	}
	wg.Wait()
	close(stop)
	scrapers.Wait()

	got := w.scrape("end")
	// The global layer admits each token's first request; every other
	// request passes the group layer and is refunded there.
	want := map[string]float64{
		"hotlimit_limiter_decisions_total,decision=allowed,limit=group":  workers * each,
		"hotlimit_limiter_decisions_total,decision=denied,limit=group":   0,
		"hotlimit_limiter_refunds_total,limit=group":                     workers * (each - 1),
		"hotlimit_limiter_decisions_total,decision=allowed,limit=global": workers,
		"hotlimit_limiter_decisions_total,decision=denied,limit=global":  workers * (each - 1),
		"hotlimit_limiter_refunds_total,limit=global":                    0,
		"hotlimit_http_requests_total,group=g,outcome=allowed":           workers,
		"hotlimit_http_requests_total,group=g,outcome=denied":            workers * (each - 1),
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s = %v, want %v", k, got[k], want[k])
		}
	}
}

// TestTwoCollectorsNeedDistinctLabels: a registry refuses a second
// Collector with the same names and labels, and one whose ConstLabels have
// other names; it accepts collectors whose ConstLabels have the same names
// and distinct values, as the package documentation says.
func TestTwoCollectorsNeedDistinctLabels(t *testing.T) {
	l, err := hotlimit.New(hotlimit.FixedWindow{Limit: 1, Window: time.Minute}, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lims := map[string]*hotlimit.Limiter{"a": l}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New(Options{Limiters: lims}))
	if err := reg.Register(New(Options{Limiters: lims})); err == nil {
		t.Error("a second collector with the same labels registered")
	}
	if err := reg.Register(New(Options{Limiters: lims, ConstLabels: prometheus.Labels{"mw": "admin"}})); err == nil {
		t.Error("collectors with different label names registered together")
	}

	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(New(Options{Limiters: lims, ConstLabels: prometheus.Labels{"mw": "public"}}))
	if err := reg.Register(New(Options{Limiters: lims, ConstLabels: prometheus.Labels{"mw": "admin"}})); err != nil {
		t.Errorf("a second collector with a distinct ConstLabels value: %v", err)
	}
	if err := reg.Register(New(Options{Namespace: "other", Limiters: lims})); err != nil {
		t.Errorf("a collector with another namespace: %v", err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Error(err)
	}
}
