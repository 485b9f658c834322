package otellimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Spans selects what an HTTP observer traces.
type Spans uint8

const (
	// SpanEvents, the default: an event "hotlimit.decision" on the
	// request's span (otelhttp's, for instance) when it is recording,
	// and no span of its own. It costs nothing when the request is not
	// sampled, and 3 allocations (480 B) when it is.
	SpanEvents Spans = iota
	// SpansAll: the event, and a "hotlimit.decide" span around each
	// backend decision, whose children are the backend's own spans (a
	// traced Redis client's round trip). A sampled span costs 9
	// allocations, 2.4 KB and about 10 µs per decision
	// (BenchmarkObservers), several times an in-process decision: worth
	// it in front of a shared store whose round trip is the point.
	SpansAll
	// SpansOff: no tracing at all.
	SpansOff
)

// HTTPOptions configure an HTTP observer. The zero value uses the global
// providers.
type HTTPOptions struct {
	// MeterProvider and TracerProvider receive the instruments and the
	// spans; nil means otel.GetMeterProvider() and
	// otel.GetTracerProvider().
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Spans selects the tracing; see Spans.
	Spans Spans
	// MaxIdentityKinds bounds the distinct values of
	// hotlimit.identity.kind, and MaxRouteGroups those of
	// hotlimit.route_group on spans (the metrics take groups from the
	// middleware's configuration); further values are "_OTHER". Zero:
	// 16 and 256.
	MaxIdentityKinds int
	MaxRouteGroups   int
	// Tenant, if set, names the tenant of a request (or its plan, or any
	// other grouping of clients) for the attribute hotlimit.tenant of
	// hotlimit.http.requests, so that the share of 429s can be read per
	// tenant. It runs on every request, in Hook. It must return a name,
	// never a credential or a key; "" means no attribute. At most
	// MaxTenants distinct names are kept (zero: 100), then "_OTHER", so
	// a tenant name taken from the request cannot grow the metric
	// without bound; names are 1 to 64 printable ASCII bytes, others are
	// "_OTHER" too.
	Tenant     func(ctx context.Context) string
	MaxTenants int
}

// HTTP observes an httplimit.Middleware through OpenTelemetry: Hook
// counts each request the middleware sees, and Observe (as one of the
// middleware's Config.Observers) times each decision of its backend; the
// backend that Backend wraps does the same and can trace each decision
// too (SpansAll). It is safe for concurrent use;
// create it with NewHTTP. Use one HTTP per middleware: two middlewares
// with the same group names would count into the same series.
type HTTP struct {
	tracer    trace.Tracer
	spans     Spans
	requests  metric.Int64Counter
	duration  metric.Float64Histogram
	remaining metric.Int64Histogram
	kinds     *boundedSet
	groups    *boundedSet
	tenant    func(context.Context) string
	tenants   *boundedSet

	mu   sync.Mutex                          // serialises additions to sets
	sets atomic.Pointer[map[reqKey]reqAttrs] // copy on write

	byLimit sync.Map // limitAlg → *limitAttrs, for Observe
}

// reqKey is what the attributes of one request count depend on.
type reqKey struct {
	group, algorithm, kind, limit, tenant string
	outcome                               admission.Outcome
}

// reqAttrs are the precomputed options of one attribute combination.
type reqAttrs struct {
	add   []metric.AddOption
	event []trace.EventOption // the metric's attributes and hotlimit.limit
}

// NewHTTP returns an HTTP observer. It returns an error if an instrument
// cannot be created.
func NewHTTP(opts HTTPOptions) (*HTTP, error) {
	mp, tp := opts.MeterProvider, opts.TracerProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if opts.MaxIdentityKinds <= 0 {
		opts.MaxIdentityKinds = defaultMaxKinds
	}
	if opts.MaxRouteGroups <= 0 {
		opts.MaxRouteGroups = defaultMaxGroups
	}
	if opts.MaxTenants <= 0 {
		opts.MaxTenants = 100
	}
	m := mp.Meter(scope)
	h := &HTTP{tracer: tp.Tracer(scope), spans: opts.Spans,
		kinds: newBoundedSet(opts.MaxIdentityKinds), groups: newBoundedSet(opts.MaxRouteGroups),
		tenant: opts.Tenant, tenants: newBoundedSetOf(opts.MaxTenants, validName)}
	var err1, err2, err3 error
	h.requests, err1 = m.Int64Counter("hotlimit.http.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the rate-limit middleware saw, by route group, outcome, algorithm of the binding limit and identity kind."))
	h.duration, err2 = m.Float64Histogram("hotlimit.backend.duration", metric.WithUnit("s"),
		metric.WithDescription("Time the rate-limit backend took to decide (a Redis round trip included)."),
		metric.WithExplicitBucketBoundaries(1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1))
	h.remaining, err3 = m.Int64Histogram("hotlimit.backend.remaining", metric.WithUnit("{unit}"),
		metric.WithDescription("Capacity left in the binding limit after each decision (Decision.Remaining)."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	empty := map[reqKey]reqAttrs{}
	h.sets.Store(&empty)
	return h, nil
}

// Hook counts ev in hotlimit.http.requests and, unless Spans is
// SpansOff, adds a "hotlimit.decision" event to the request's span when
// it is recording. Use it as httplimit.Config.Hook, or call it from one.
// It allocates nothing once each combination of attributes has been seen.
func (h *HTTP) Hook(ev admission.Event) {
	ctx := ev.Context
	if ctx == nil {
		ctx = context.Background()
	}
	k := reqKey{group: ev.Group, algorithm: ev.Algorithm, kind: ev.IdentityKind, limit: ev.Limit, outcome: ev.Outcome}
	if h.tenant != nil {
		if t := h.tenant(ctx); t != "" {
			k.tenant = h.tenants.value(t)
		}
	}
	a := h.attrs(k)
	h.requests.Add(ctx, 1, a.add...)
	if h.spans == SpansOff {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("hotlimit.decision", a.event...)
	}
}

// attrs returns the options for k, building them the first time.
func (h *HTTP) attrs(k reqKey) reqAttrs {
	if a, ok := (*h.sets.Load())[k]; ok {
		return a
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.sets.Load()
	if a, ok := old[k]; ok {
		return a
	}
	kv := []attribute.KeyValue{keyGroup.String(k.group), keyOutcome.String(k.outcome.String())}
	if alg := eventAlgorithm(k.algorithm); alg != "" {
		kv = append(kv, keyAlgorithm.String(alg))
	}
	if k.kind != "" {
		kv = append(kv, keyKind.String(h.kinds.value(k.kind)))
	}
	if k.tenant != "" {
		kv = append(kv, keyTenant.String(k.tenant))
	}
	a := reqAttrs{
		add:   []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))},
		event: []trace.EventOption{trace.WithAttributes(append(kv[:len(kv):len(kv)], keyLimit.String(k.limit))...)},
	}
	m := make(map[reqKey]reqAttrs, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	k.group, k.algorithm, k.kind, k.limit = strings.Clone(k.group), strings.Clone(k.algorithm), strings.Clone(k.kind), strings.Clone(k.limit)
	k.tenant = strings.Clone(k.tenant)
	m[k] = a
	h.sets.Store(&m)
	return a
}

// decideSpan is the key under which Begin puts the "hotlimit.decide" span
// it started in the context, for Observe to end it: one per HTTP, so
// that two observers never end each other's.
type decideSpan struct{ h *HTTP }

// Begin implements admission.Observer: with SpansAll, it starts a
// "hotlimit.decide" span (a child of the request's), which encloses the
// backend's own work (a Redis call's span, say) and which Observe ends
// with the decision. Otherwise it returns ctx.
func (h *HTTP) Begin(ctx context.Context, ev *admission.Event) context.Context {
	if h.spans != SpansAll {
		return ctx
	}
	ctx, span := h.tracer.Start(ctx, "hotlimit.decide", trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		h.startAttrs(span, ev)
	}
	return context.WithValue(ctx, decideSpan{h}, span)
}

// Observe implements admission.Observer: it records each decision of the
// backend of a middleware (or interceptor) it observes
// (hotlimit.backend.duration and hotlimit.backend.remaining): pass the
// HTTP in httplimit.Config.Observers (or grpclimit.Config.Observers).
// With SpansAll it ends the span Begin started, with the decision's
// result. Without spans it allocates nothing once each limit has been
// seen.
func (h *HTTP) Observe(ctx context.Context, ev *admission.Event) {
	if span, ok := ctx.Value(decideSpan{h}).(trace.Span); ok {
		if span.IsRecording() {
			endAttrs(span, ev.Result.Decision, ev.Result.Err)
		}
		span.End()
	}
	res := ev.Result
	first := h.observed(ev.GroupLimit, ev.GroupAlgorithm)
	var opts []metric.RecordOption
	switch res.Outcome {
	case admission.OutcomeErrorAllowed, admission.OutcomeErrorDenied:
		switch errorType(res.Err) {
		case "timeout":
			opts = first.timeout
		case "canceled":
			opts = first.canceled
		default:
			opts = first.failed
		}
		h.duration.Record(ctx, ev.Duration.Seconds(), opts...)
		return
	case admission.OutcomeAllowed:
		opts = first.allowed
	default:
		opts = first.denied
	}
	h.duration.Record(ctx, ev.Duration.Seconds(), opts...)
	bound := first
	if res.BindingReported {
		bound = h.observed(res.Limit())
	}
	h.remaining.Record(ctx, res.Decision.Remaining, bound.rem...)
}

// observed returns the attributes of limit, whose algorithm is alg (a
// policy type's name), building them the first time the pair is seen.
func (h *HTTP) observed(limit, alg string) *limitAttrs {
	k := limitAlg{limit, alg}
	if la, ok := h.byLimit.Load(k); ok {
		return la.(*limitAttrs)
	}
	la, _ := h.byLimit.LoadOrStore(limitAlg{strings.Clone(limit), alg}, newLimitAttrs(limit, eventAlgorithm(alg)))
	return la.(*limitAttrs)
}

// limitAlg is a limit and its algorithm, which a runtime policy change
// may make another.
type limitAlg struct{ limit, alg string }

// limitAttrs are one limit's precomputed attributes.
type limitAttrs struct {
	name, algorithm           string
	allowed, denied, rem      []metric.RecordOption
	timeout, canceled, failed []metric.RecordOption
}

func newLimitAttrs(name, alg string) *limitAttrs {
	opt := func(kv ...attribute.KeyValue) []metric.RecordOption {
		kv = append(kv, keyLimit.String(name), keyAlgorithm.String(alg))
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	return &limitAttrs{name: name, algorithm: alg,
		allowed:  opt(keyResult.String("allowed")),
		denied:   opt(keyResult.String("denied")),
		rem:      opt(),
		timeout:  opt(keyResult.String("error"), keyErrorType.String("timeout")),
		canceled: opt(keyResult.String("error"), keyErrorType.String("canceled")),
		failed:   opt(keyResult.String("error"), keyErrorType.String(otherValue)),
	}
}

// startAttrs sets a decision span's first attributes: the request's
// group limit and its algorithm, its number of layers, its identity's
// kind and its route group.
func (h *HTTP) startAttrs(span trace.Span, ev *admission.Event) {
	first := h.observed(ev.GroupLimit, ev.GroupAlgorithm)
	kv := [5]attribute.KeyValue{
		keyLimit.String(first.name),
		keyAlgorithm.String(first.algorithm),
		keyLayers.Int(ev.Result.Layers()),
	}
	n := 3
	if kind := ev.Result.IdentityKind; kind != "" {
		kv[n] = keyKind.String(h.kinds.value(kind))
		n++
	}
	if ev.Group != "" {
		kv[n] = keyGroup.String(h.groups.value(ev.Group))
		n++
	}
	span.SetAttributes(kv[:n]...)
}

// endAttrs sets a decision span's result.
func endAttrs(span trace.Span, d hotlimit.Decision, err error) {
	if err != nil {
		span.SetAttributes(keyResult.String("error"), keyErrorType.String(errorType(err)))
		span.SetStatus(codes.Error, "rate-limit backend failed")
		return
	}
	if d.Allowed {
		span.SetAttributes(keyResult.String("allowed"), keyRemaining.Int64(d.Remaining))
		return
	}
	kv := [3]attribute.KeyValue{keyResult.String("denied"), keyRemaining.Int64(d.Remaining)}
	n := 2
	if d.RetryAfter != hotlimit.Never {
		kv[n] = keyRetryAfter.Float64(d.RetryAfter.Seconds())
		n++
	}
	span.SetAttributes(kv[:n]...)
}
