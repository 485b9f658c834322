// Package promlimit exports hotlimit's counters to Prometheus: each
// limiter's Stats, and an httplimit.Middleware's request counts per route
// group and outcome.
//
// It lives in a nested module so that the root module does not depend on
// the Prometheus client.
//
//	reg.MustRegister(promlimit.New(promlimit.Options{Middleware: m}))
//
// With the default namespace, the metrics are:
//
//	hotlimit_limiter_decisions_total{limit, decision="allowed"|"denied"}
//	hotlimit_limiter_refunds_total{limit}    admissions given back
//	hotlimit_limiter_keys{limit}             keys held now
//	hotlimit_limiter_memory_bytes{limit}     heap bytes held (Limiter.MemStats)
//	hotlimit_limiter_swept_total{limit}      fresh keys removed
//	hotlimit_limiter_evicted_total{limit}    non-fresh keys evicted (WithMaxKeys)
//	hotlimit_http_requests_total{group, outcome}
//
// Every _total is a counter and never decreases (hotlimit.Stats says
// what each counts). An admission that is given back later (a layer
// that hotlimit.AllowLayers or the middleware's global layer undid, a
// Refund, a cancelled Wait) stays in decisions_total{decision="allowed"}
// and adds one to refunds_total, so the admissions that stood are
//
//	rate(hotlimit_limiter_decisions_total{decision="allowed"}[5m])
//	  - rate(hotlimit_limiter_refunds_total[5m])
//
// swept_total counts the keys a refund left fresh too: a request refused
// by a later layer leaves no state behind in the earlier ones.
//
// where outcome is an admission.Outcome ("allowed", "denied" for a 429,
// "denied_never" for a 403, "dry_run_denied", "exempt", "key_denied",
// "error_allowed", "error_denied", "cost_invalid"): error_allowed and error_denied count the failure
// policy's decisions, fail-open and fail-closed, when the backend could
// not decide. BackendMetrics adds the backend's latency and the
// distribution of remaining capacity. The share of 429s per route group is
//
//	sum by (group) (rate(hotlimit_http_requests_total{outcome=~"denied|key_denied"}[5m]))
//	  / sum by (group) (rate(hotlimit_http_requests_total[5m]))
//
// The values are read when Prometheus scrapes: the collector keeps no
// state and adds nothing to the request path.
//
// A registry refuses two collectors whose metrics have the same names and
// labels, and a metric name exported with different label names. To
// register two Collectors in one registry (two middlewares, say), give
// both ConstLabels with the same names and distinct values (such as
// {"mw": "public"} and {"mw": "admin"}), or distinct Namespaces. A limiter
// exported by both is then exported twice, and a sum over the label
// counts it twice.
package promlimit

import (
	"reflect"
	"sort"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/prometheus/client_golang/prometheus"
)

// Options say what a Collector exports.
type Options struct {
	// Namespace prefixes every metric name; "" means "hotlimit".
	Namespace string
	// Limiters are exported under their names (the "limit" label).
	Limiters map[string]*hotlimit.Limiter
	// Middleware, if set (an *httplimit.Middleware), has its Counts
	// exported; if its backend is an *admission.Local, its limiters are
	// exported too (unless Limiters already names them).
	Middleware interface {
		Backend() admission.Backend
		Counts() []admission.GroupCounts
	}
	// ConstLabels are added to every metric (for example the service).
	ConstLabels prometheus.Labels
}

// Collector is a prometheus.Collector over limiters and a middleware. It
// is safe for concurrent use; create it with New.
type Collector struct {
	names    []string // sorted limiter names
	limiters []*hotlimit.Limiter
	mw       interface {
		Counts() []admission.GroupCounts
	} // nil: none

	decisions, refunds, keys, memory, swept, evicted, requests *prometheus.Desc
}

// New returns a Collector for opts.
func New(opts Options) *Collector {
	ns := opts.Namespace
	if ns == "" {
		ns = "hotlimit"
	}
	all := make(map[string]*hotlimit.Limiter, len(opts.Limiters))
	for name, l := range opts.Limiters {
		if l != nil {
			all[name] = l
		}
	}
	if isNil(opts.Middleware) {
		opts.Middleware = nil
	}
	if opts.Middleware != nil {
		if local, ok := opts.Middleware.Backend().(*admission.Local); ok {
			for _, name := range local.Classes().Names() {
				if _, dup := all[name]; !dup {
					all[name] = local.Classes().Class(name)
				}
			}
		}
	}
	c := &Collector{}
	if opts.Middleware != nil {
		c.mw = opts.Middleware
	}
	for name := range all {
		c.names = append(c.names, name)
	}
	sort.Strings(c.names)
	for _, name := range c.names {
		c.limiters = append(c.limiters, all[name])
	}
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, opts.ConstLabels)
	}
	c.decisions = desc("limiter_decisions_total", "Decisions made by the limiter, by result. An admission given back later stays counted as allowed: see limiter_refunds_total.", "limit", "decision")
	c.refunds = desc("limiter_refunds_total", "Admissions given back: a layer undone because a later layer denied, a Refund, a cancelled Wait.", "limit")
	c.keys = desc("limiter_keys", "Keys the limiter currently holds.", "limit")
	c.memory = desc("limiter_memory_bytes", "Heap bytes the limiter holds: tables, long-key arenas, sliding logs (Limiter.MemStats).", "limit")
	c.swept = desc("limiter_swept_total", "Fresh keys removed: by the sweeper, to make room, or because a refund left the key fresh.", "limit")
	c.evicted = desc("limiter_evicted_total", "Non-fresh keys evicted to stay under the maximum number of keys.", "limit")
	c.requests = desc("http_requests_total", "HTTP requests seen by the rate-limit middleware, by route group and outcome.", "group", "outcome")
	return c
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.decisions
	ch <- c.refunds
	ch <- c.keys
	ch <- c.memory
	ch <- c.swept
	ch <- c.evicted
	if c.mw != nil {
		ch <- c.requests
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for i, l := range c.limiters {
		name := c.names[i]
		st := l.Stats()
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(st.Allowed), name, "allowed")
		ch <- prometheus.MustNewConstMetric(c.decisions, prometheus.CounterValue, float64(st.Denied), name, "denied")
		ch <- prometheus.MustNewConstMetric(c.refunds, prometheus.CounterValue, float64(st.Refunded), name)
		ch <- prometheus.MustNewConstMetric(c.keys, prometheus.GaugeValue, float64(st.Keys), name)
		ch <- prometheus.MustNewConstMetric(c.memory, prometheus.GaugeValue, float64(l.MemStats().Total), name)
		ch <- prometheus.MustNewConstMetric(c.swept, prometheus.CounterValue, float64(st.Swept), name)
		ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(st.Evicted), name)
	}
	if c.mw == nil {
		return
	}
	for _, g := range c.mw.Counts() {
		for o, n := range g.Counts {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(n), g.Group, admission.Outcome(o).String())
		}
	}
}

// isNil reports whether v is nil or a nil pointer in an interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
