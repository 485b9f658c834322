package redislimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

//go:embed script.lua
var scriptSource string

// script is loaded on first use and then called by its SHA1; go-redis
// sends the source again (EVAL) when the server answers NOSCRIPT, which is
// safe because the script did not run.
var script = redis.NewScript(scriptSource)

// Limiter is a keyed rate limiter whose state lives in Redis, so that
// every process that uses the same Redis, name and policy shares one
// quota per key. It implements hotlimit's token bucket (GCRA), fixed
// window and sliding-window counter with the same Decision semantics, in
// integer microseconds of the Redis server's clock (see the package doc).
//
// Each decision is one round trip: one script that reads the server's
// time, decides, and writes the key's new state with a TTL. A Limiter is
// safe for concurrent use and must not be copied. Create one with New; the
// zero Limiter is not usable.
type Limiter struct {
	client  redis.Scripter
	name    string
	spec    spec
	argv    [4]any // spec's kind, a, tau, limit, in decimal, boxed once for the script call
	head    string // the Redis key is head + key + tail
	tail    string
	timeout time.Duration
	breaker *Breaker
	fail    FailurePolicy
	failSet bool              // WithFailurePolicy was given
	local   *hotlimit.Limiter // the Fallback limiter, or nil
	owned   bool              // local was built by New (FallbackLocal)
	cache   *denyCache        // the two-tier mode's local denials, or nil

	// testNow, when set, is the instant (µs) the script decides at
	// instead of the server's TIME. Only this package's tests set it.
	testNow func() int64
}

// Option configures a Limiter.
type Option func(*config)

type config struct {
	prefix   string
	tag      *string
	timeout  time.Duration
	breaker  *Breaker
	fail     FailurePolicy
	failSet  bool
	denyKeys int
	err      error
}

func (c *config) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("redislimit: "+format, args...)
	}
}

// DefaultPrefix starts every Redis key a Limiter writes, unless
// WithPrefix says otherwise.
const DefaultPrefix = "hotlimit:"

// DefaultTimeout bounds each call to Redis unless WithTimeout says
// otherwise.
const DefaultTimeout = 100 * time.Millisecond

// WithPrefix sets the start of every Redis key (default "hotlimit:").
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithHashTag puts every key of the limiter in the Redis Cluster slot of
// tag: keys become prefix + "{" + tag + "}" + name + ":{" + key + "}"
// (Redis hashes only the first braces' content, the tag). Give the
// same tag to every limiter that takes part in one AllowLayers call on a
// cluster, since a script's keys must share a slot; this puts all of their
// keys on one node. Without it, keys are prefix + name + ":{" + key + "}",
// so the keys of one identity (the same key under several limits) share a
// slot and different identities spread over the cluster. A go-redis Ring
// shards by the same hash tags, but nothing checks that a layered call's
// keys are on one shard: use the same rule. The tag must not contain a
// brace, and must not be empty (Redis would hash the whole key).
func WithHashTag(tag string) Option {
	return func(c *config) {
		if tag == "" {
			c.failf("WithHashTag: empty tag")
		}
		for i := 0; i < len(tag); i++ {
			if tag[i] == '}' || tag[i] == '{' {
				c.failf("WithHashTag: tag %q contains a brace", tag)
			}
		}
		c.tag = &tag
	}
}

// WithTimeout bounds each call to Redis (default 100ms), on top of the
// caller's context. A call that times out after it was sent may still have
// consumed quota; it is never retried.
func WithTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.failf("WithTimeout: timeout must be > 0, got %v", d)
		}
		c.timeout = d
	}
}

// WithBreaker makes the limiter use b, typically shared with the other
// limiters on the same client. The default is a breaker of its own with
// DefaultFailures and DefaultCooldown.
func WithBreaker(b *Breaker) Option {
	return func(c *config) {
		if b == nil {
			c.failf("WithBreaker: nil Breaker")
		}
		c.breaker = b
	}
}

// WithFailurePolicy sets what the limiter answers when Redis cannot
// decide (default FailClosed).
func WithFailurePolicy(p FailurePolicy) Option {
	return func(c *config) {
		if p.mode == failFallback && p.local == nil {
			c.failf("WithFailurePolicy: Fallback(nil)")
		}
		c.fail, c.failSet = p, true
	}
}

// WithLocalDenials turns on the two-tier mode: the limiter remembers, in
// process, up to maxKeys keys that Redis denied and until when, and
// answers requests on them locally until their RetryAfter has passed. An
// abusive client then costs no round trip per request. Such a local
// denial reports the Remaining of the cached denial and its RetryAfter and
// ResetAfter counted down. 0 turns it off (the default).
func WithLocalDenials(maxKeys int) Option {
	return func(c *config) {
		if maxKeys < 0 {
			c.failf("WithLocalDenials: maxKeys must be ≥ 0, got %d", maxKeys)
		}
		c.denyKeys = maxKeys
	}
}

// New returns a Limiter for policy (hotlimit.TokenBucket, FixedWindow or
// SlidingWindow, or a pointer to one) whose state lives in Redis through
// client, under name: limiters in other processes share a quota with it
// when they use the same Redis, prefix, name and policy.
//
// The client must not retry commands, since a retried decision could
// consume twice, and must apply context deadlines, so that WithTimeout
// holds: for *redis.Client, *redis.ClusterClient and *redis.Ring, New
// requires MaxRetries: -1 and ContextTimeoutEnabled: true, and of a
// *redis.ClusterClient also MaxRedirects: -1 (its redirect loop resends a
// command after a broken connection; with -1 a MOVED or ASK reply during
// resharding fails that one decision, and the client reloads its slot
// map for the next); any other
// Scripter must behave so too, and be comparable (a pointer). New makes no
// call to Redis.
func New(client redis.Scripter, name string, policy any, opts ...Option) (*Limiter, error) {
	cfg := config{prefix: DefaultPrefix, timeout: DefaultTimeout}
	for _, o := range opts {
		if o == nil {
			cfg.failf("nil Option")
			continue
		}
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if name == "" {
		return nil, errors.New("redislimit: empty limiter name")
	}
	if strings.ContainsAny(name, "{}") {
		// Without braces in names, the first "{" after the prefix (and
		// tag) ends the name: two limiters never share a Redis key,
		// whatever keys they are given.
		return nil, fmt.Errorf("redislimit: limiter name %q contains a brace", name)
	}
	if err := checkClient(client); err != nil {
		return nil, err
	}
	sp, err := newSpec(policy)
	if err != nil {
		return nil, err
	}
	l := &Limiter{client: client, name: name, spec: sp, timeout: cfg.timeout, breaker: cfg.breaker, fail: cfg.fail, failSet: cfg.failSet}
	l.argv = [4]any{strconv.Itoa(sp.kind), strconv.FormatInt(sp.a, 10), strconv.FormatInt(sp.tau, 10), strconv.FormatInt(sp.limit, 10)}
	if cfg.tag != nil {
		l.head, l.tail = cfg.prefix+"{"+*cfg.tag+"}"+name+":{", "}"
	} else {
		l.head, l.tail = cfg.prefix+name+":{", "}"
	}
	if l.breaker == nil {
		l.breaker = NewBreaker(DefaultFailures, DefaultCooldown)
	}
	switch cfg.fail.mode {
	case failFallback:
		l.local = cfg.fail.local
	case failFallbackLocal:
		if l.local, err = hotlimit.New(policy, cfg.fail.opts...); err != nil {
			return nil, fmt.Errorf("redislimit: FallbackLocal: %w", err)
		}
		l.owned = true
	}
	if cfg.denyKeys > 0 {
		l.cache = newDenyCache(cfg.denyKeys)
	}
	return l, nil
}

// checkClient rejects the go-redis clients configured to retry commands or
// to ignore context deadlines.
func checkClient(client redis.Scripter) error {
	var retries int
	var ctxTimeouts bool
	switch c := client.(type) {
	case nil:
		return errors.New("redislimit: nil client")
	case *redis.Client:
		o := c.Options()
		retries, ctxTimeouts = o.MaxRetries, o.ContextTimeoutEnabled
	case *redis.ClusterClient:
		o := c.Options()
		retries, ctxTimeouts = o.MaxRetries, o.ContextTimeoutEnabled
		// Its own loop sends a command again after a broken connection
		// or a timeout (same node, then another), up to MaxRedirects
		// times, whatever MaxRetries says.
		if o.MaxRedirects > 0 {
			return fmt.Errorf("redislimit: the cluster client resends failed commands (MaxRedirects %d), which could consume quota twice: set MaxRedirects: -1", o.MaxRedirects)
		}
	case *redis.Ring:
		o := c.Options()
		retries, ctxTimeouts = o.MaxRetries, o.ContextTimeoutEnabled
	default:
		// Layered calls compare clients: the type must be comparable.
		if !reflect.TypeOf(client).Comparable() {
			return fmt.Errorf("redislimit: client type %T is not comparable; pass a pointer", client)
		}
		return nil // retries and deadlines: the caller's responsibility, as documented
	}
	if retries > 0 {
		return fmt.Errorf("redislimit: the client retries failed commands (MaxRetries %d), which could consume quota twice: set MaxRetries: -1", retries)
	}
	if !ctxTimeouts {
		return errors.New("redislimit: the client ignores context deadlines, so WithTimeout could not hold: set ContextTimeoutEnabled: true")
	}
	return nil
}

// Name returns the limiter's name.
func (l *Limiter) Name() string { return l.name }

// Limit returns the policy's capacity: Burst or Limit.
func (l *Limiter) Limit() int64 { return l.spec.limit }

// RedisKey returns the Redis key that holds key's state.
func (l *Limiter) RedisKey(key string) string { return l.head + key + l.tail }

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (hotlimit.Decision, error) {
	return AllowLayers(ctx, Layer{Limiter: l, Key: key, Cost: 1})
}

// AllowN decides a request of cost for key, consuming cost if it is
// admitted, with the Decision semantics of hotlimit's Limiter.AllowN.
//
// A nil error means Redis decided. Otherwise the error wraps ErrUnavailable
// and its cause, and the Decision is the limiter's FailurePolicy's answer;
// the call is not retried, since it may have consumed quota.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (hotlimit.Decision, error) {
	return AllowLayers(ctx, Layer{Limiter: l, Key: key, Cost: cost})
}

// Close closes the in-process limiter that FallbackLocal built, if any.
// The Limiter keeps working after Close.
func (l *Limiter) Close() error {
	if l.owned {
		return l.local.Close()
	}
	return nil
}

// Layer is one limit of a layered check: a limiter, the key it limits the
// request by, and the request's cost there. See AllowLayers.
type Layer struct {
	Limiter *Limiter
	Key     string
	Cost    int64
}

// ErrMixedClients is returned by AllowLayers for layers whose limiters do
// not share one client: one script cannot span two servers.
var ErrMixedClients = errors.New("redislimit: the layers' limiters use different clients")

// AllowLayers admits a request only if every layer admits it, all or
// nothing, in one script call: either every layer consumes its cost or
// none does. Unlike hotlimit.AllowLayers nothing is consumed even for an
// instant, since the script decides every layer before it writes. The
// Decision is that of hotlimit.AllowLayers: it reports the binding
// layer's Remaining and Limit and the largest ResetAfter. Allowed, the
// binding layer is the one with the fewest requests of its cost left
// (⌊Remaining/Cost⌋, ties to the smaller Remaining); denied, it is the
// one with the largest RetryAfter among the layers that deny, each layer
// checked on its state as it was. A layer with a nil Limiter, or a key
// longer than hotlimit.MaxKeyLen, denies with RetryAfter = Never without
// a call.
//
// Every limiter must use the same client (else ErrMixedClients). The call
// takes the smallest of their timeouts and goes through each of their
// breakers. When Redis does not decide, each layer's FailurePolicy
// applies: a FailClosed layer denies the request; otherwise the layers
// with a Fallback decide locally, and FailOpen layers are skipped; the
// error wraps ErrUnavailable and the cause. On a Redis Cluster the keys
// must share a slot: see WithHashTag.
func AllowLayers(ctx context.Context, layers ...Layer) (hotlimit.Decision, error) {
	d, _, err := AllowLayersIndex(ctx, layers...)
	return d, err
}

// AllowLayersIndex is AllowLayers that also returns the index of the
// binding layer, the one whose Limit and Remaining the Decision reports,
// as hotlimit.AllowLayersIndex does: -1 for no layers or mixed clients.
// When Redis does not decide, it is the FailClosed layer that denied, the
// binding layer among the fallbacks, or 0 when only FailOpen layers were
// left.
func AllowLayersIndex(ctx context.Context, layers ...Layer) (hotlimit.Decision, int, error) {
	if len(layers) == 0 {
		return hotlimit.Decision{Allowed: true}, -1, nil
	}
	first := layers[0].Limiter
	timeout := time.Duration(0)
	for i, ly := range layers {
		if ly.Limiter == nil {
			return hotlimit.Decision{RetryAfter: hotlimit.Never}, i, nil
		}
		if len(ly.Key) > hotlimit.MaxKeyLen {
			return hotlimit.Decision{Limit: ly.Limiter.spec.limit, RetryAfter: hotlimit.Never}, i, nil
		}
		if ly.Limiter.client != first.client {
			return hotlimit.Decision{RetryAfter: hotlimit.Never}, -1, ErrMixedClients
		}
		if i == 0 || ly.Limiter.timeout < timeout {
			timeout = ly.Limiter.timeout
		}
	}
	if d, i, ok := localDenial(layers); ok {
		return d, i, nil
	}

	// Go through every distinct breaker (usually one, shared).
	var bbuf [4]*Breaker
	var pbuf [4]bool // whether the call is bs[i]'s probe
	bs, probes := bbuf[:0], pbuf[:0]
	for _, ly := range layers {
		if !containsBreaker(bs, ly.Limiter.breaker) {
			bs = append(bs, ly.Limiter.breaker)
		}
	}
	for i, b := range bs {
		ok, probe := b.acquire()
		if !ok {
			for j, a := range bs[:i] {
				a.release(probes[j])
			}
			d, i := failDecision(layers)
			return d, i, fmt.Errorf("%w: %w", ErrUnavailable, ErrCircuitOpen)
		}
		probes = append(probes, probe)
	}

	var rbuf [2 + 4*8]int64
	reply, err := run(ctx, timeout, layers, rbuf[:0])
	if err != nil {
		// A reply error comes from a live server, and a cancellation
		// from the caller: neither says Redis is down. A caller's
		// deadline that passes does count: Redis did not answer in the
		// time it was given, and a hung Redis must open the breaker even
		// when every caller's deadline is shorter than WithTimeout.
		var rerr redis.Error
		live, canceled := errors.As(err, &rerr), errors.Is(ctx.Err(), context.Canceled)
		for i, b := range bs {
			switch {
			case live:
				b.done(true)
			case canceled:
				b.release(probes[i])
			default:
				b.done(false)
			}
		}
		d, i := failDecision(layers)
		return d, i, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	for _, b := range bs {
		b.done(true)
	}
	d, denied, binding, err := decode(reply, layers)
	if err != nil {
		d, i := failDecision(layers)
		return d, i, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if denied >= 0 {
		remember(layers, denied, d, reply)
	}
	return d, binding, nil
}

func containsBreaker(bs []*Breaker, b *Breaker) bool {
	for _, x := range bs {
		if x == b {
			return true
		}
	}
	return false
}

// run makes the one script call for layers and appends the reply's
// integers to out.
//
// The slices handed to go-redis escape to the heap whatever their size:
// they are made to measure rather than from arrays on the stack, which
// would move to the heap whole.
func run(ctx context.Context, timeout time.Duration, layers []Layer, out []int64) ([]int64, error) {
	keys, args := make([]string, 0, len(layers)), make([]any, 0, 1+5*len(layers))
	if l := layers[0].Limiter; l.testNow != nil {
		args = append(args, strconv.FormatInt(l.testNow(), 10))
	} else {
		args = append(args, "")
	}
	for _, ly := range layers {
		l := ly.Limiter
		keys = append(keys, l.RedisKey(ly.Key))
		args = append(args, l.argv[0], l.argv[1], l.argv[2], l.argv[3], ly.Cost)
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
		// Otherwise the caller's deadline comes first: it bounds the
		// call, without a timer of our own.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	vals, err := script.Run(ctx, layers[0].Limiter.client, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	for _, v := range vals {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("redislimit: unexpected script reply %v", vals)
		}
		out = append(out, n)
	}
	return out, nil
}

// requests is how many more requests of cost fit in remaining units, as
// hotlimit.AllowLayers counts them to find the binding layer.
func requests(remaining, cost int64) int64 {
	if cost <= 0 {
		return math.MaxInt64
	}
	return remaining / cost
}

// micros converts a duration in µs from the script, -1 meaning never.
func micros(us int64) time.Duration {
	if us < 0 {
		return hotlimit.Never
	}
	return time.Duration(us) * time.Microsecond
}

// decode builds the Decision from the script's reply (see script.lua).
// denied is the index of the denying layer, or -1; binding that of the
// layer the Decision reports.
func decode(r []int64, layers []Layer) (d hotlimit.Decision, denied, binding int, err error) {
	n := len(layers)
	if len(r) == 1+2*n && r[0] == 1 {
		var best int64 // the binding layer's requests(Remaining, Cost)
		for i, ly := range layers {
			rem, reset := r[1+2*i], micros(r[2+2*i])
			if k := requests(rem, ly.Cost); i == 0 || k < best || k == best && rem < d.Remaining {
				best, d.Remaining, d.Limit, binding = k, rem, ly.Limiter.spec.limit, i
			}
			d.ResetAfter = max(d.ResetAfter, reset)
		}
		d.Allowed = true
		return d, -1, binding, nil
	}
	if len(r) != 2+4*n || r[0] != 0 || r[1] < 1 || r[1] > int64(n) {
		return d, -1, -1, fmt.Errorf("redislimit: unexpected script reply %v", slices.Clone(r)) // a copy: r stays on the caller's stack
	}
	at := func(j int) (ok bool, rem int64, retry, reset time.Duration) {
		o := 2 + 4*j
		return r[o] == 1, r[o+1], micros(r[o+2]), micros(r[o+3])
	}
	i := int(r[1] - 1)
	_, rem, retry, reset := at(i)
	d = hotlimit.Decision{Limit: layers[i].Limiter.spec.limit, Remaining: rem, RetryAfter: retry, ResetAfter: reset}
	binding = i
	for j := range layers {
		if j == i {
			continue
		}
		ok, rem, retry, reset := at(j)
		if !ok && retry > d.RetryAfter {
			d.RetryAfter, d.Limit, d.Remaining, binding = retry, layers[j].Limiter.spec.limit, rem, j
		}
		d.ResetAfter = max(d.ResetAfter, reset)
	}
	return d, i, binding, nil
}

// remember caches the denial of layer i in its limiter's two-tier cache,
// unless the key appeared in an earlier layer (then the denial depends on
// that layer's cost too) or the request can never be admitted.
func remember(layers []Layer, i int, d hotlimit.Decision, r []int64) {
	ly := layers[i]
	c := ly.Limiter.cache
	if c == nil {
		return
	}
	o := 2 + 4*i
	retry, reset := micros(r[o+2]), micros(r[o+3])
	if retry == hotlimit.Never {
		return
	}
	for _, prev := range layers[:i] {
		if prev.Limiter == ly.Limiter && prev.Key == ly.Key {
			return
		}
	}
	now := c.now()
	c.put(ly.Key, denial{until: now + retry, resetAt: now + reset, cost: ly.Cost, rem: r[o+1]})
}

// localDenial answers from the two-tier caches: a layer with a live cached
// denial that covers its cost denies the request without a round trip.
func localDenial(layers []Layer) (hotlimit.Decision, int, bool) {
	var d hotlimit.Decision
	found, binding := false, -1
	for i, ly := range layers {
		c := ly.Limiter.cache
		if c == nil || ly.Cost > ly.Limiter.spec.limit {
			// A cost above the limit is never admitted: Redis answers
			// RetryAfter = Never, which no cached denial would.
			continue
		}
		now := c.now()
		den, ok := c.get(ly.Key, ly.Cost, now)
		if !ok {
			continue
		}
		retry := den.until - now
		if !found || retry > d.RetryAfter {
			d.RetryAfter, d.Limit = retry, ly.Limiter.spec.limit
			d.Remaining, d.ResetAfter = den.rem, max(0, den.resetAt-now)
			binding = i
		}
		found = true
	}
	return d, binding, found
}
