package otellimit

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hotlimit/hotlimit/admission"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// GRPCOptions configure a GRPC observer. The zero value uses the global
// meter provider.
type GRPCOptions struct {
	// MeterProvider receives the instrument; nil means
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// MaxIdentityKinds bounds the distinct values of
	// hotlimit.identity.kind, and MaxMethodGroups those of
	// hotlimit.method_group; further values are "_OTHER". Zero: 16 and
	// 256.
	MaxIdentityKinds int
	MaxMethodGroups  int
}

// GRPC observes a grpclimit.Interceptor through OpenTelemetry: Hook
// counts each call the interceptor decides in hotlimit.grpc.calls. It is
// safe for concurrent use; create it with NewGRPC. Use one GRPC per
// interceptor: two interceptors with the same group names would count
// into the same series.
type GRPC struct {
	calls  metric.Int64Counter
	kinds  *boundedSet
	groups *boundedSet

	mu   sync.Mutex                                     // serialises additions to sets
	sets atomic.Pointer[map[grpcKey][]metric.AddOption] // copy on write
}

// grpcKey is what the attributes of one call count depend on.
type grpcKey struct {
	group, algorithm, kind string
	outcome                admission.Outcome
}

// NewGRPC returns a GRPC observer. It returns an error if the instrument
// cannot be created.
func NewGRPC(opts GRPCOptions) (*GRPC, error) {
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if opts.MaxIdentityKinds <= 0 {
		opts.MaxIdentityKinds = defaultMaxKinds
	}
	if opts.MaxMethodGroups <= 0 {
		opts.MaxMethodGroups = defaultMaxGroups
	}
	g := &GRPC{kinds: newBoundedSet(opts.MaxIdentityKinds), groups: newBoundedSetOf(opts.MaxMethodGroups, validName)}
	var err error
	g.calls, err = mp.Meter(scope).Int64Counter("hotlimit.grpc.calls", metric.WithUnit("{call}"),
		metric.WithDescription("gRPC calls the rate-limit interceptor decided, by method group, outcome, algorithm of the binding limit and identity kind."))
	if err != nil {
		return nil, err
	}
	empty := map[grpcKey][]metric.AddOption{}
	g.sets.Store(&empty)
	return g, nil
}

// Hook counts ev in hotlimit.grpc.calls. Use it as grpclimit.Config.Hook,
// or call it from one. It allocates nothing once each combination of
// attributes has been seen.
func (g *GRPC) Hook(ev admission.Event) {
	ctx := ev.Context
	if ctx == nil {
		ctx = context.Background()
	}
	g.calls.Add(ctx, 1, g.attrs(grpcKey{group: ev.Group, algorithm: ev.Algorithm, kind: ev.IdentityKind, outcome: ev.Outcome})...)
}

// attrs returns the options for k, building them the first time.
func (g *GRPC) attrs(k grpcKey) []metric.AddOption {
	if a, ok := (*g.sets.Load())[k]; ok {
		return a
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := *g.sets.Load()
	if a, ok := old[k]; ok {
		return a
	}
	kv := []attribute.KeyValue{keyMethodGroup.String(g.groups.value(k.group)), keyOutcome.String(k.outcome.String())}
	if alg := eventAlgorithm(k.algorithm); alg != "" {
		kv = append(kv, keyAlgorithm.String(alg))
	}
	if k.kind != "" {
		kv = append(kv, keyKind.String(g.kinds.value(k.kind)))
	}
	a := []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	m := make(map[grpcKey][]metric.AddOption, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	k.group, k.algorithm, k.kind = strings.Clone(k.group), strings.Clone(k.algorithm), strings.Clone(k.kind)
	m[k] = a
	g.sets.Store(&m)
	return a
}
