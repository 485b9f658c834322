package promlimit

import (
	"github.com/hotlimit/hotlimit/admission"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func TestCollector(t *testing.T) {
	clock := hotlimit.NewManualClock()
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
			"cheap":  hotlimit.FixedWindow{Limit: 100, Window: time.Minute},
		},
		Groups: []httplimit.Group{
			{Name: "search", Patterns: []string{"/search"}, Limit: "search"},
			{Name: "cheap", Limit: "cheap"},
			{Name: "health", Patterns: []string{"/healthz"}, Exempt: true},
		},
		DefaultGroup: "cheap",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send := func(path, tok string) {
		r := httptest.NewRequest("GET", path, nil)
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	for range 5 {
		send("/search", "a") // 2 allowed, 3 denied
	}
	send("/search", "b")
	send("/other", "a")
	send("/other", "") // no key: denied
	send("/healthz", "")

	extra, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.Allow("x")
	extra.Allow("x")

	c := New(Options{Middleware: m, Limiters: map[string]*hotlimit.Limiter{"jobs": extra}, ConstLabels: prometheus.Labels{"service": "api"}})
	want := `
# HELP hotlimit_http_requests_total HTTP requests seen by the rate-limit middleware, by route group and outcome.
# TYPE hotlimit_http_requests_total counter
hotlimit_http_requests_total{group="cheap",outcome="allowed",service="api"} 1
hotlimit_http_requests_total{group="cheap",outcome="cost_invalid",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="denied",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="denied_never",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="dry_run_denied",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="error_allowed",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="error_denied",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="exempt",service="api"} 0
hotlimit_http_requests_total{group="cheap",outcome="key_denied",service="api"} 1
hotlimit_http_requests_total{group="health",outcome="allowed",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="cost_invalid",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="denied",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="denied_never",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="dry_run_denied",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="error_allowed",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="error_denied",service="api"} 0
hotlimit_http_requests_total{group="health",outcome="exempt",service="api"} 1
hotlimit_http_requests_total{group="health",outcome="key_denied",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="allowed",service="api"} 3
hotlimit_http_requests_total{group="search",outcome="cost_invalid",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="denied",service="api"} 3
hotlimit_http_requests_total{group="search",outcome="denied_never",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="dry_run_denied",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="error_allowed",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="error_denied",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="exempt",service="api"} 0
hotlimit_http_requests_total{group="search",outcome="key_denied",service="api"} 0
# HELP hotlimit_limiter_decisions_total Decisions made by the limiter, by result. An admission given back later stays counted as allowed: see limiter_refunds_total.
# TYPE hotlimit_limiter_decisions_total counter
hotlimit_limiter_decisions_total{decision="allowed",limit="cheap",service="api"} 1
hotlimit_limiter_decisions_total{decision="allowed",limit="jobs",service="api"} 1
hotlimit_limiter_decisions_total{decision="allowed",limit="search",service="api"} 3
hotlimit_limiter_decisions_total{decision="denied",limit="cheap",service="api"} 0
hotlimit_limiter_decisions_total{decision="denied",limit="jobs",service="api"} 1
hotlimit_limiter_decisions_total{decision="denied",limit="search",service="api"} 3
# HELP hotlimit_limiter_evicted_total Non-fresh keys evicted to stay under the maximum number of keys.
# TYPE hotlimit_limiter_evicted_total counter
hotlimit_limiter_evicted_total{limit="cheap",service="api"} 0
hotlimit_limiter_evicted_total{limit="jobs",service="api"} 0
hotlimit_limiter_evicted_total{limit="search",service="api"} 0
# HELP hotlimit_limiter_keys Keys the limiter currently holds.
# TYPE hotlimit_limiter_keys gauge
hotlimit_limiter_keys{limit="cheap",service="api"} 1
hotlimit_limiter_keys{limit="jobs",service="api"} 1
hotlimit_limiter_keys{limit="search",service="api"} 2
# HELP hotlimit_limiter_refunds_total Admissions given back: a layer undone because a later layer denied, a Refund, a cancelled Wait.
# TYPE hotlimit_limiter_refunds_total counter
hotlimit_limiter_refunds_total{limit="cheap",service="api"} 0
hotlimit_limiter_refunds_total{limit="jobs",service="api"} 0
hotlimit_limiter_refunds_total{limit="search",service="api"} 0
# HELP hotlimit_limiter_swept_total Fresh keys removed: by the sweeper, to make room, or because a refund left the key fresh.
# TYPE hotlimit_limiter_swept_total counter
hotlimit_limiter_swept_total{limit="cheap",service="api"} 0
hotlimit_limiter_swept_total{limit="jobs",service="api"} 0
hotlimit_limiter_swept_total{limit="search",service="api"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"hotlimit_http_requests_total", "hotlimit_limiter_decisions_total", "hotlimit_limiter_evicted_total",
		"hotlimit_limiter_keys", "hotlimit_limiter_refunds_total", "hotlimit_limiter_swept_total"); err != nil {
		t.Fatal(err)
	}
	// The memory gauge is each limiter's MemStats().Total (its value
	// depends on the platform's word size).
	local := m.Backend().(*admission.Local)
	mems := map[string]*hotlimit.Limiter{"jobs": extra, "search": local.Classes().Class("search"), "cheap": local.Classes().Class("cheap")}
	mfs, err := gather(c)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "hotlimit_limiter_memory_bytes" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "limit" {
					n++
					if got, want := mt.GetGauge().GetValue(), float64(mems[lp.GetValue()].MemStats().Total); got != want || got == 0 {
						t.Errorf("memory of %s = %v, want %v", lp.GetValue(), got, want)
					}
				}
			}
		}
	}
	if n != 3 {
		t.Errorf("%d memory series, want 3", n)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	// It registers cleanly, and the counts move with traffic.
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	send("/search", "c")
	if got := testutil.ToFloat64(onlyMetric(c, "search", "allowed")); got != 4 {
		t.Fatalf("search allowed = %v, want 4", got)
	}
}

// onlyMetric is a collector yielding c's single request counter for group
// and outcome, for testutil.ToFloat64.
func onlyMetric(c *Collector, group, outcome string) prometheus.Collector {
	return collectorFunc(func(ch chan<- prometheus.Metric) {
		for _, g := range c.mw.Counts() {
			if g.Group != group {
				continue
			}
			for o, n := range g.Counts {
				if admission.Outcome(o).String() == outcome {
					ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(n), group, outcome)
				}
			}
		}
	})
}

type collectorFunc func(chan<- prometheus.Metric)

func (f collectorFunc) Describe(chan<- *prometheus.Desc)    {}
func (f collectorFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

func TestLimitersOnly(t *testing.T) {
	l, err := hotlimit.New(hotlimit.FixedWindow{Limit: 1, Window: time.Minute}, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Allow("k")
	c := New(Options{Namespace: "svc", Limiters: map[string]*hotlimit.Limiter{"l": l, "nil": nil}})
	if n := testutil.CollectAndCount(c); n != 7 {
		t.Fatalf("%d metrics, want 7 (one limiter, no middleware)", n)
	}
	if n := testutil.CollectAndCount(c, "svc_limiter_keys"); n != 1 {
		t.Fatalf("svc_limiter_keys: %d series", n)
	}
}

// TestConcurrentScrapes: scrapes run concurrently with each other and with
// traffic (go test -race), and counters never go backwards between
// scrapes.
func TestConcurrentScrapes(t *testing.T) {
	m, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 50, Window: time.Hour}},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithSweepInterval(0)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(New(Options{Middleware: m}))
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("Authorization", "Bearer t"+strconv.Itoa(i*1000+j%7))
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0.0
			for range 50 {
				mfs, err := reg.Gather()
				if err != nil {
					t.Error(err)
					return
				}
				total := 0.0
				for _, mf := range mfs {
					if mf.GetName() == "hotlimit_http_requests_total" {
						for _, mt := range mf.GetMetric() {
							total += mt.GetCounter().GetValue()
						}
					}
				}
				if total < last {
					t.Errorf("requests total went from %v to %v", last, total)
				}
				last = total
			}
		}()
	}
	wg.Wait()
}

// gather collects c through a fresh registry.
func gather(c prometheus.Collector) ([]*dto.MetricFamily, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return reg.Gather()
}
