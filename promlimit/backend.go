package promlimit

import (
	"context"
	"sync"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// BackendMetrics measures each decision of a middleware's backend: how
// long it took (a Redis round trip included, for redislimit's) and the
// capacity it left. With the default namespace:
//
//	hotlimit_backend_duration_seconds{limit, result="allowed"|"denied"|"error"}  histogram
//	hotlimit_backend_remaining{limit}                                         histogram
//
// where limit is the request's group limit for the duration, and the
// binding limit (the one the RateLimit header names) for the remaining
// capacity, recorded for each decision made (not for errors). A
// BackendMetrics is an admission.Observer: hand it to the middleware (or
// grpclimit's interceptor) as an observer of its decisions, and register
// it:
//
//	bm := promlimit.NewBackendMetrics(promlimit.BackendOptions{})
//	mw, err := httplimit.New(httplimit.Config{..., Observers: []admission.Observer{bm}})
//	reg.MustRegister(bm, promlimit.New(promlimit.Options{Middleware: mw}))
//
// A decision costs two histogram observations more, and no allocation.
// Use one BackendMetrics per middleware (or distinct ConstLabels, as for
// Collector). It is safe for concurrent use.
type BackendMetrics struct {
	duration  *prometheus.HistogramVec
	remaining *prometheus.HistogramVec
	byLimit   sync.Map   // limit name → *limitObservers, for Observe
	mu        sync.Mutex // orders Retain with a limit's first resolution in byLimit
}

// BackendOptions say how a BackendMetrics names its metrics.
type BackendOptions struct {
	// Namespace prefixes every metric name; "" means "hotlimit".
	Namespace string
	// ConstLabels are added to every metric.
	ConstLabels prometheus.Labels
	// DurationBuckets and RemainingBuckets are the histograms' upper
	// bounds; nil means 1 µs to 1 s in steps of about 2.5×, and 0 to
	// 1,000,000 in steps of about 2×.
	DurationBuckets, RemainingBuckets []float64
}

// NewBackendMetrics returns a BackendMetrics.
func NewBackendMetrics(opts BackendOptions) *BackendMetrics {
	ns := opts.Namespace
	if ns == "" {
		ns = "hotlimit"
	}
	if opts.DurationBuckets == nil {
		opts.DurationBuckets = []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1}
	}
	if opts.RemainingBuckets == nil {
		opts.RemainingBuckets = []float64{0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000}
	}
	return &BackendMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "backend_duration_seconds",
			Help:        "Time the rate-limit backend took to decide (a Redis round trip included), by the request's group limit and result.",
			ConstLabels: opts.ConstLabels, Buckets: opts.DurationBuckets,
		}, []string{"limit", "result"}),
		remaining: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Name: "backend_remaining",
			Help:        "Capacity left in the binding limit after each decision (Decision.Remaining).",
			ConstLabels: opts.ConstLabels, Buckets: opts.RemainingBuckets,
		}, []string{"limit"}),
	}
}

// Describe implements prometheus.Collector.
func (bm *BackendMetrics) Describe(ch chan<- *prometheus.Desc) {
	bm.duration.Describe(ch)
	bm.remaining.Describe(ch)
}

// Collect implements prometheus.Collector.
func (bm *BackendMetrics) Collect(ch chan<- prometheus.Metric) {
	bm.duration.Collect(ch)
	bm.remaining.Collect(ch)
}

// limitObservers are one limit's series, resolved once.
type limitObservers struct {
	allowed, denied, failed, remaining prometheus.Observer
}

func (bm *BackendMetrics) observers(limit string) *limitObservers {
	return &limitObservers{
		allowed:   bm.duration.WithLabelValues(limit, "allowed"),
		denied:    bm.duration.WithLabelValues(limit, "denied"),
		failed:    bm.duration.WithLabelValues(limit, "error"),
		remaining: bm.remaining.WithLabelValues(limit),
	}
}

// Begin implements admission.Observer: it returns ctx (the metrics need
// nothing before the decision).
func (bm *BackendMetrics) Begin(ctx context.Context, _ *admission.Event) context.Context {
	return ctx
}

// Observe implements admission.Observer: it records the duration of the
// backend's decision under the request's group limit, and, for a
// decision made, the binding layer's Remaining under its limit.
func (bm *BackendMetrics) Observe(_ context.Context, ev *admission.Event) {
	res := ev.Result
	first := bm.cached(ev.GroupLimit)
	elapsed := ev.Duration.Seconds()
	switch res.Outcome {
	case admission.OutcomeErrorAllowed, admission.OutcomeErrorDenied:
		first.failed.Observe(elapsed)
		return
	case admission.OutcomeAllowed:
		first.allowed.Observe(elapsed)
	default:
		first.denied.Observe(elapsed)
	}
	bound := first
	if name, _ := res.Limit(); name != "" { // "" unless the backend reported it
		bound = bm.cached(name)
	}
	bound.remaining.Observe(float64(res.Decision.Remaining))
}

// cached returns limit's series, resolving them the first time.
func (bm *BackendMetrics) cached(limit string) *limitObservers {
	if o, ok := bm.byLimit.Load(limit); ok {
		return o.(*limitObservers)
	}
	// Under mu: series resolved before a Retain that deletes them must
	// not be cached after it (they would no longer be exported).
	bm.mu.Lock()
	defer bm.mu.Unlock()
	if o, ok := bm.byLimit.Load(limit); ok {
		return o.(*limitObservers)
	}
	o := bm.observers(limit)
	bm.byLimit.Store(limit, o)
	return o
}

// Retain deletes the series of every limit for which keep returns false,
// and returns how many limits it deleted. A service whose limits change
// (a configuration reload: a changed policy is often a new limit name)
// calls it after each change with the running limits, so that the
// series of dropped limits do not stay, one more label value each, for
// the life of the process. An observation of a deleted limit afterwards
// (a request decided before the change and observed after it) starts
// its series again, from zero; the next Retain deletes them.
func (bm *BackendMetrics) Retain(keep func(limit string) bool) int {
	bm.mu.Lock()
	defer bm.mu.Unlock()
	n := 0
	for name := range bm.limitNames() {
		if keep(name) {
			continue
		}
		bm.duration.DeletePartialMatch(prometheus.Labels{"limit": name})
		bm.remaining.DeleteLabelValues(name)
		bm.byLimit.Delete(name)
		n++
	}
	return n
}

// limitNames returns the limit label of every series bm holds.
func (bm *BackendMetrics) limitNames() map[string]struct{} {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		bm.Collect(ch)
		close(ch)
	}()
	names := map[string]struct{}{}
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == "limit" {
				names[l.GetValue()] = struct{}{}
			}
		}
	}
	return names
}
