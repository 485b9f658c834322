package otellimit

import (
	"context"
	"errors"
	"reflect"
	"sort"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ObserveLimiters registers the hotlimit.limiter.* instruments (see the
// package documentation) on mp's meter for each named limiter, read from
// its Stats when a reader collects: nothing is added to the decision
// path. The name is the hotlimit.limit attribute. A nil mp means
// otel.GetMeterProvider(); nil limiters are skipped. Unregister the
// returned Registration when the limiters go away.
func ObserveLimiters(mp metric.MeterProvider, limiters map[string]*hotlimit.Limiter) (metric.Registration, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	names := make([]string, 0, len(limiters))
	for name, l := range limiters {
		if l != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	type observed struct {
		l                      *hotlimit.Limiter
		limit, allowed, denied metric.ObserveOption
	}
	obs := make([]observed, len(names))
	for i, name := range names {
		obs[i] = observed{
			l:       limiters[name],
			limit:   metric.WithAttributeSet(attribute.NewSet(keyLimit.String(name))),
			allowed: metric.WithAttributeSet(attribute.NewSet(keyLimit.String(name), keyDecision.String("allowed"))),
			denied:  metric.WithAttributeSet(attribute.NewSet(keyLimit.String(name), keyDecision.String("denied"))),
		}
	}
	m := mp.Meter(scope)
	decisions, err1 := m.Int64ObservableCounter("hotlimit.limiter.decisions", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions the limiter made, by hotlimit.decision. An admission given back later stays counted as allowed: see hotlimit.limiter.refunds."))
	refunds, err2 := m.Int64ObservableCounter("hotlimit.limiter.refunds", metric.WithUnit("{decision}"),
		metric.WithDescription("Admissions given back: a layer undone because a later layer denied, a Refund, a cancelled Wait."))
	keys, err3 := m.Int64ObservableUpDownCounter("hotlimit.limiter.keys", metric.WithUnit("{key}"),
		metric.WithDescription("Keys the limiter holds now."))
	swept, err4 := m.Int64ObservableCounter("hotlimit.limiter.swept", metric.WithUnit("{key}"),
		metric.WithDescription("Fresh keys removed: by the sweeper, to make room, or because a refund left the key fresh."))
	evicted, err5 := m.Int64ObservableCounter("hotlimit.limiter.evicted", metric.WithUnit("{key}"),
		metric.WithDescription("Non-fresh keys evicted to stay under the maximum number of keys."))
	memory, err6 := m.Int64ObservableUpDownCounter("hotlimit.limiter.memory.usage", metric.WithUnit("By"),
		metric.WithDescription("Heap bytes the limiter holds (Limiter.MemStats().Total): tables, long-key arenas, sliding logs."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, x := range obs {
			st := x.l.Stats()
			o.ObserveInt64(decisions, clamp(st.Allowed), x.allowed)
			o.ObserveInt64(decisions, clamp(st.Denied), x.denied)
			o.ObserveInt64(refunds, clamp(st.Refunded), x.limit)
			o.ObserveInt64(keys, clamp(st.Keys), x.limit)
			o.ObserveInt64(swept, clamp(st.Swept), x.limit)
			o.ObserveInt64(evicted, clamp(st.Evicted), x.limit)
			o.ObserveInt64(memory, clamp(x.l.MemStats().Total), x.limit)
		}
		return nil
	}, decisions, refunds, keys, swept, evicted, memory)
}

// clamp converts a counter to int64; a count of 2^63 is centuries away.
func clamp(n uint64) int64 { return int64(min(n, 1<<63-1)) }

// ObserveMiddleware is ObserveLimiters for the limiters of m's backend
// (an httplimit.Middleware's, a grpclimit.Interceptor's), when it is an
// admission.Local, under their limit names. For another backend
// (redislimit's) it registers nothing and returns a Registration whose
// Unregister does nothing.
func ObserveMiddleware(mp metric.MeterProvider, m interface{ Backend() admission.Backend }) (metric.Registration, error) {
	if v := reflect.ValueOf(m); m == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, errors.New("otellimit: ObserveMiddleware: nil Middleware")
	}
	local, ok := m.Backend().(*admission.Local)
	if !ok {
		return noRegistration{}, nil
	}
	lims := map[string]*hotlimit.Limiter{}
	for _, name := range local.Classes().Names() {
		lims[name] = local.Classes().Class(name)
	}
	return ObserveLimiters(mp, lims)
}

type noRegistration struct{ metric.Registration }

func (noRegistration) Unregister() error { return nil }
