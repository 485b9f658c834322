package otellimit

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Redis turns redislimit's hooks into OpenTelemetry metrics. Its methods
// have the signatures of redislimit.Hooks' fields, so otellimit does not
// depend on redislimit (nor on a Redis client); wire them in like this:
//
//	rm, err := otellimit.NewRedis(mp)
//	lim, err := redislimit.New(client, "search", policy, redislimit.WithHooks(redislimit.Hooks{
//		Call:        rm.Call,
//		Failure:     rm.Failure,
//		LocalDenial: rm.LocalDenial,
//		Breaker:     rm.Breaker,
//	}))
//
// The instruments:
//
//	hotlimit.redis.call.duration   Float64Histogram s         hotlimit.redis.node, error.type
//	hotlimit.redis.fallback        Int64Counter     {decision} hotlimit.limit, hotlimit.decision, error.type
//	hotlimit.redis.breaker.changes Int64Counter     {change}   hotlimit.redis.node, hotlimit.redis.breaker.from,
//	                                                           hotlimit.redis.breaker.to
//	hotlimit.redis.local_denials   Int64Counter     {decision} hotlimit.limit
//
// call.duration is each script call's round trip (error.type "timeout" or
// "_OTHER" on a failed call); fallback counts the decisions the failure
// policy made instead of Redis (fail-open: allowed, fail-closed: denied,
// or the local fallback's answer); breaker.changes counts each node's
// circuit transitions ("closed", "open", "half-open"); local_denials the
// requests the two-tier cache denied without a round trip.
// hotlimit.redis.node is a node's address as redislimit reports it (the
// cluster's topology bounds it; at most 64 distinct, then "_OTHER"), and
// hotlimit.limit a limiter's name (at most 256). A Redis is safe for
// concurrent use; create it with NewRedis.
type Redis struct {
	duration metric.Float64Histogram
	fallback metric.Int64Counter
	changes  metric.Int64Counter
	local    metric.Int64Counter
	nodes    *boundedSet
	limits   *boundedSet
	states   *boundedSet

	mu   sync.Mutex // serialises additions to sets
	sets atomic.Pointer[map[redisKey]redisOpts]
}

// redisOpts are one attribute set's options, for each kind of instrument.
type redisOpts struct {
	rec []metric.RecordOption
	add []metric.AddOption
}

// redisKey is what one measurement's attributes depend on.
type redisKey struct {
	inst          byte // 'c' call, 'f' fallback, 'b' breaker, 'l' local denial
	a, b, c, errT string
}

// NewRedis returns a Redis recording to mp (nil: otel.GetMeterProvider()).
func NewRedis(mp metric.MeterProvider) (*Redis, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(scope)
	r := &Redis{nodes: newBoundedSetOf(64, validName), limits: newBoundedSetOf(256, validName), states: newBoundedSet(8)}
	var err1, err2, err3, err4 error
	r.duration, err1 = m.Float64Histogram("hotlimit.redis.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Round trip of each rate-limit script call to a Redis node."),
		metric.WithExplicitBucketBoundaries(5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1))
	r.fallback, err2 = m.Int64Counter("hotlimit.redis.fallback", metric.WithUnit("{decision}"),
		metric.WithDescription("Decisions the failure policy made because Redis could not (fail-open, fail-closed or the local fallback)."))
	r.changes, err3 = m.Int64Counter("hotlimit.redis.breaker.changes", metric.WithUnit("{change}"),
		metric.WithDescription("Changes of a Redis node's circuit breaker state."))
	r.local, err4 = m.Int64Counter("hotlimit.redis.local_denials", metric.WithUnit("{decision}"),
		metric.WithDescription("Requests the in-process tier denied from a cached denial, without a round trip."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	empty := map[redisKey]redisOpts{}
	r.sets.Store(&empty)
	return r, nil
}

// Call records a script call's round trip (redislimit.Hooks.Call).
func (r *Redis) Call(node string, took time.Duration, err error) {
	r.duration.Record(context.Background(), took.Seconds(), r.opts(redisKey{inst: 'c', a: node, errT: redisErrorType(err)}).rec...)
}

// Failure counts a decision of the failure policy (redislimit.Hooks.Failure).
func (r *Redis) Failure(limiter string, d hotlimit.Decision, err error) {
	dec := "denied"
	if d.Allowed {
		dec = "allowed"
	}
	r.fallback.Add(context.Background(), 1, r.opts(redisKey{inst: 'f', a: limiter, b: dec, errT: redisErrorType(err)}).add...)
}

// Breaker counts a change of a node's circuit (redislimit.Hooks.Breaker),
// from and to being "closed", "open" or "half-open".
func (r *Redis) Breaker(node, from, to string) {
	r.changes.Add(context.Background(), 1, r.opts(redisKey{inst: 'b', a: node, b: from, c: to}).add...)
}

// LocalDenial counts a denial the two-tier cache answered
// (redislimit.Hooks.LocalDenial).
func (r *Redis) LocalDenial(limiter string) {
	r.local.Add(context.Background(), 1, r.opts(redisKey{inst: 'l', a: limiter}).add...)
}

// redisErrorType classifies a Redis error: "" for none, "timeout", or
// "_OTHER", as redislimit.Hooks.Call's doc tells a timeout apart.
func redisErrorType(err error) string {
	if err == nil {
		return ""
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return otherValue
}

// opts returns the measurement options of k, built the first time.
func (r *Redis) opts(k redisKey) redisOpts {
	if o, ok := (*r.sets.Load())[k]; ok {
		return o
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := *r.sets.Load()
	if o, ok := old[k]; ok {
		return o
	}
	var kv []attribute.KeyValue
	switch k.inst {
	case 'c':
		kv = append(kv, keyNode.String(r.nodes.value(k.a)))
	case 'f':
		kv = append(kv, keyLimit.String(r.limits.value(k.a)), keyDecision.String(k.b))
	case 'b':
		kv = append(kv, keyNode.String(r.nodes.value(k.a)), keyFrom.String(r.states.value(k.b)), keyTo.String(r.states.value(k.c)))
	case 'l':
		kv = append(kv, keyLimit.String(r.limits.value(k.a)))
	}
	if k.errT != "" {
		kv = append(kv, keyErrorType.String(k.errT))
	}
	set := attribute.NewSet(kv...)
	o := redisOpts{rec: []metric.RecordOption{metric.WithAttributeSet(set)}, add: []metric.AddOption{metric.WithAttributeSet(set)}}
	if len(old) >= 4096 { // every part is bounded; this only caps the cache
		return o
	}
	m := make(map[redisKey]redisOpts, len(old)+1)
	for a, b := range old {
		m[a] = b
	}
	k.a, k.b, k.c = strings.Clone(k.a), strings.Clone(k.b), strings.Clone(k.c)
	m[k] = o
	r.sets.Store(&m)
	return o
}

const (
	keyNode = attribute.Key("hotlimit.redis.node")
	keyFrom = attribute.Key("hotlimit.redis.breaker.from")
	keyTo   = attribute.Key("hotlimit.redis.breaker.to")
)

// validName reports whether v can be a node address or a limiter name
// attribute: 1 to 64 printable ASCII bytes.
func validName(v string) bool {
	if len(v) == 0 || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return true
}
