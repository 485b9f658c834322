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

// Spans selects what an Observer traces.
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

// Options configure an Observer. The zero value uses the global
// providers.
type Options struct {
	// MeterProvider and TracerProvider receive the instruments and the
	// spans; nil means otel.GetMeterProvider() and
	// otel.GetTracerProvider().
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
	// Spans selects the tracing; see Spans.
	Spans Spans
	// MaxIdentityKinds bounds the distinct values of
	// hotlimit.identity.kind, and MaxGroups those of
	// hotlimit.method_group and of hotlimit.route_group on spans
	// (hotlimit.http.requests takes route groups from the middleware's
	// configuration); further values are "_OTHER". Zero: 16 and 256. An
	// Observer that serves a middleware and an interceptor bounds their
	// identity kinds together.
	MaxIdentityKinds int
	MaxGroups        int
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

// Observer observes an httplimit.Middleware or a grpclimit.Interceptor
// (or one of each) through OpenTelemetry. Hook, as the transport's
// Config.Hook, counts each request or call it decides, in
// hotlimit.http.requests or hotlimit.grpc.calls as the Event's
// Transport says; the Observer itself, one of the transport's
// Config.Observers, times each decision of its backend (Observe) and
// with SpansAll traces it (Begin). It is safe for concurrent use; create
// it with New. Use one Observer per middleware and one per interceptor
// at most: two middlewares (or two interceptors) with the same group
// names would count into the same series.
type Observer struct {
	tracer    trace.Tracer
	spans     Spans
	requests  metric.Int64Counter // hotlimit.http.requests
	calls     metric.Int64Counter // hotlimit.grpc.calls
	duration  metric.Float64Histogram
	remaining metric.Int64Histogram
	kinds     *boundedSet
	groups    *boundedSet // hotlimit.route_group on spans
	methods   *boundedSet // hotlimit.method_group
	tenant    func(context.Context) string
	tenants   *boundedSet

	mu   sync.Mutex                            // serialises additions to sets
	sets atomic.Pointer[map[hookKey]hookAttrs] // copy on write

	byLimit sync.Map // limitAlg → *limitAttrs, for Observe
}

var _ admission.Observer = (*Observer)(nil)

// hookKey is what the attributes of one count of Hook depend on: a gRPC
// call's (grpc set) have no limit and no tenant.
type hookKey struct {
	grpc                                  bool
	group, algorithm, kind, limit, tenant string
	outcome                               admission.Outcome
}

// hookAttrs are the precomputed options of one attribute combination.
type hookAttrs struct {
	add   []metric.AddOption
	event []trace.EventOption // an HTTP request's: the metric's attributes and hotlimit.limit
}

// New returns an Observer. It returns an error if an instrument cannot
// be created.
func New(opts Options) (*Observer, error) {
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
	if opts.MaxGroups <= 0 {
		opts.MaxGroups = defaultMaxGroups
	}
	if opts.MaxTenants <= 0 {
		opts.MaxTenants = 100
	}
	m := mp.Meter(scope)
	o := &Observer{tracer: tp.Tracer(scope), spans: opts.Spans,
		kinds: newBoundedSet(opts.MaxIdentityKinds), groups: newBoundedSetOf(opts.MaxGroups, validName),
		methods: newBoundedSetOf(opts.MaxGroups, validName),
		tenant:  opts.Tenant, tenants: newBoundedSetOf(opts.MaxTenants, validName)}
	var err1, err2, err3, err4 error
	o.requests, err1 = m.Int64Counter("hotlimit.http.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the rate-limit middleware saw, by route group, outcome, algorithm of the binding limit and identity kind."))
	o.calls, err4 = m.Int64Counter("hotlimit.grpc.calls", metric.WithUnit("{call}"),
		metric.WithDescription("gRPC calls the rate-limit interceptor decided, by method group, outcome, algorithm of the binding limit and identity kind."))
	o.duration, err2 = m.Float64Histogram("hotlimit.backend.duration", metric.WithUnit("s"),
		metric.WithDescription("Time the rate-limit backend took to decide (a Redis round trip included)."),
		metric.WithExplicitBucketBoundaries(1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1))
	o.remaining, err3 = m.Int64Histogram("hotlimit.backend.remaining", metric.WithUnit("{unit}"),
		metric.WithDescription("Capacity left in the binding limit after each decision (Decision.Remaining)."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	empty := map[hookKey]hookAttrs{}
	o.sets.Store(&empty)
	return o, nil
}

// Hook counts ev by its Transport. A gRPC call's ("grpc", set by
// grpclimit) goes to hotlimit.grpc.calls, and is not traced. Any other
// Event, an HTTP request's ("http", set by httplimit) or one built
// without a Transport, is a request: Hook counts it in
// hotlimit.http.requests and, unless Spans is SpansOff, adds a
// "hotlimit.decision" event to the request's span when it is recording.
// Use it as httplimit.Config.Hook or grpclimit.Config.Hook, or call it
// from one. It allocates nothing once each combination of attributes has
// been seen.
func (o *Observer) Hook(ev admission.Event) {
	ctx := ev.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if ev.Transport == "grpc" {
		k := hookKey{grpc: true, group: ev.Group, algorithm: ev.Algorithm, kind: ev.IdentityKind, outcome: ev.Outcome}
		o.calls.Add(ctx, 1, o.attrs(k).add...)
		return
	}
	k := hookKey{group: ev.Group, algorithm: ev.Algorithm, kind: ev.IdentityKind, limit: ev.Limit, outcome: ev.Outcome}
	if o.tenant != nil {
		if t := o.tenant(ctx); t != "" {
			k.tenant = o.tenants.value(t)
		}
	}
	a := o.attrs(k)
	o.requests.Add(ctx, 1, a.add...)
	if o.spans == SpansOff {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.AddEvent("hotlimit.decision", a.event...)
	}
}

// attrs returns the options for k, building them the first time.
func (o *Observer) attrs(k hookKey) hookAttrs {
	if a, ok := (*o.sets.Load())[k]; ok {
		return a
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	old := *o.sets.Load()
	if a, ok := old[k]; ok {
		return a
	}
	group := keyGroup.String(k.group)
	if k.grpc {
		group = keyMethodGroup.String(o.methods.value(k.group))
	}
	kv := []attribute.KeyValue{group, keyOutcome.String(k.outcome.String())}
	if alg := eventAlgorithm(k.algorithm); alg != "" {
		kv = append(kv, keyAlgorithm.String(alg))
	}
	if k.kind != "" {
		kv = append(kv, keyKind.String(o.kinds.value(k.kind)))
	}
	if k.tenant != "" {
		kv = append(kv, keyTenant.String(k.tenant))
	}
	a := hookAttrs{add: []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}}
	if !k.grpc {
		a.event = []trace.EventOption{trace.WithAttributes(append(kv[:len(kv):len(kv)], keyLimit.String(k.limit))...)}
	}
	m := make(map[hookKey]hookAttrs, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	k.group, k.algorithm, k.kind, k.limit = strings.Clone(k.group), strings.Clone(k.algorithm), strings.Clone(k.kind), strings.Clone(k.limit)
	k.tenant = strings.Clone(k.tenant)
	m[k] = a
	o.sets.Store(&m)
	return a
}

// decideSpan is the key under which Begin puts the "hotlimit.decide" span
// it started in the context, for Observe to end it: one per Observer, so
// that two observers never end each other's.
type decideSpan struct{ o *Observer }

// Begin implements admission.Observer: with SpansAll, it starts a
// "hotlimit.decide" span (a child of the request's), which encloses the
// backend's own work (a Redis call's span, say) and which Observe ends
// with the decision. Otherwise it returns ctx.
func (o *Observer) Begin(ctx context.Context, ev *admission.Event) context.Context {
	if o.spans != SpansAll {
		return ctx
	}
	ctx, span := o.tracer.Start(ctx, "hotlimit.decide", trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		o.startAttrs(span, ev)
	}
	return context.WithValue(ctx, decideSpan{o}, span)
}

// Observe implements admission.Observer: it records each decision of the
// backend of a middleware (or interceptor) it observes
// (hotlimit.backend.duration and hotlimit.backend.remaining): pass the
// Observer in httplimit.Config.Observers (or grpclimit.Config.Observers).
// With SpansAll it ends the span Begin started, with the decision's
// result. Without spans it allocates nothing once each limit has been
// seen.
func (o *Observer) Observe(ctx context.Context, ev *admission.Event) {
	if span, ok := ctx.Value(decideSpan{o}).(trace.Span); ok {
		if span.IsRecording() {
			endAttrs(span, ev.Result.Decision, ev.Result.Err)
		}
		span.End()
	}
	res := ev.Result
	first := o.observed(ev.GroupLimit, ev.GroupAlgorithm)
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
		o.duration.Record(ctx, ev.Duration.Seconds(), opts...)
		return
	case admission.OutcomeAllowed:
		opts = first.allowed
	default:
		opts = first.denied
	}
	o.duration.Record(ctx, ev.Duration.Seconds(), opts...)
	bound := first
	if res.BindingReported {
		bound = o.observed(res.Limit())
	}
	o.remaining.Record(ctx, res.Decision.Remaining, bound.rem...)
}

// observed returns the attributes of limit, whose algorithm is alg (a
// policy type's name), building them the first time the pair is seen.
func (o *Observer) observed(limit, alg string) *limitAttrs {
	k := limitAlg{limit, alg}
	if la, ok := o.byLimit.Load(k); ok {
		return la.(*limitAttrs)
	}
	la, _ := o.byLimit.LoadOrStore(limitAlg{strings.Clone(limit), alg}, newLimitAttrs(limit, eventAlgorithm(alg)))
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
func (o *Observer) startAttrs(span trace.Span, ev *admission.Event) {
	first := o.observed(ev.GroupLimit, ev.GroupAlgorithm)
	kv := [5]attribute.KeyValue{
		keyLimit.String(first.name),
		keyAlgorithm.String(first.algorithm),
		keyLayers.Int(ev.Result.Layers()),
	}
	n := 3
	if kind := ev.Result.IdentityKind; kind != "" {
		kv[n] = keyKind.String(o.kinds.value(kind))
		n++
	}
	if ev.Group != "" {
		kv[n] = keyGroup.String(o.groups.value(ev.Group))
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
