package redislimit

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/luasrc"
	"github.com/redis/go-redis/v9"
)

// luaScript is a script and its source. It is loaded on first use and
// then called by its SHA1; go-redis sends the source again (EVAL) when the
// server answers NOSCRIPT, which is safe because the script did not run.
type luaScript struct {
	*redis.Script
	src string
}

func newScript(src string) *luaScript { return &luaScript{redis.NewScript(src), src} }

var (
	// Each script is luasrc.Start, then its own file (ops.lua after
	// luasrc.Incarnation, script.lua after windows.lua).
	//go:embed script.lua
	decideSource string
	//go:embed windows.lua
	windowsSource string
	//go:embed ops.lua
	opsSource string
	//go:embed permits.lua
	permitSource string

	decideScript = newScript(luasrc.Start + windowsSource + decideSource)   // decisions, one or more layers
	opsScript    = newScript(luasrc.Start + luasrc.Incarnation + opsSource) // Wait's reservation, Admission.Refund, Reset
	permitScript = newScript(luasrc.Start + permitSource)                   // the concurrency limit's permits
)

// Limiter is a keyed rate limiter whose state lives in Redis, so that
// every process that uses the same Redis, name and policy shares one
// quota per key. It implements every hotlimit rate policy (token bucket
// as GCRA, leaky bucket, fixed window, sliding-window counter, sliding
// log) with the same Decision semantics, in integer microseconds of the
// Redis server's clock (see the package doc).
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
	ihead   string // the key's incarnation key (see incKey) is ihead + key + tail
	ispec   string // or ispec + key, where the state's is special + key
	tail    string
	timeout time.Duration
	breaker *Breaker
	fail    failurePolicy
	failSet bool              // WithFailOpen or WithFallbackLocal was given
	local   *hotlimit.Limiter // the WithFallbackLocal limiter, or nil
	cache   *denyCache        // the two-tier mode's local denials, or nil
	hooks   *Hooks            // WithHooks, or nil
	rt      *router           // the client's router
	id      uint64            // unique among the process's limiters
	circ    *circuit          // breaker's circuit for the client's only node, or nil on a cluster
	special string            // the Redis key of key k is special + k when k's hash tag would be empty (see RedisKey)
	leases  *leases           // WithLeases: requests are decided from leases; nil: by Redis

	// testNow, when set, is the instant (µs) the script decides at
	// instead of the server's TIME. Only this package's tests set it.
	testNow func() int64
}

// New returns a Limiter for policy (hotlimit.TokenBucket, LeakyBucket,
// FixedWindow, SlidingWindow or SlidingLog, or a pointer to one) whose state lives in Redis through
// client, under name: limiters in other processes share a quota with it
// when they use the same Redis, prefix, name and policy.
//
// The client must not retry commands, since a retried decision could
// consume twice, and must apply context deadlines, so that WithTimeout
// holds: for *redis.Client, *redis.ClusterClient and *redis.Ring, New
// requires MaxRetries: -1 and ContextTimeoutEnabled: true, and of a
// *redis.ClusterClient also MaxRedirects: -1 (its redirect loop resends a
// command after a broken connection; the Limiter follows MOVED and ASK
// replies itself, see the package doc); any other
// Scripter must behave so too, and be comparable (a pointer). New makes no
// call to Redis.
func New(client redis.Scripter, name string, policy hotlimit.Policy, opts ...Option) (*Limiter, error) {
	cfg := config{prefix: defaultPrefix, timeout: defaultTimeout}
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
	// What hotlimit rejects, redislimit rejects too, so that the same
	// policy works in process (WithFallbackLocal) and on Redis.
	check, err := hotlimit.New(policy, hotlimit.WithShards(1), hotlimit.WithSweepInterval(0))
	if err != nil {
		return nil, fmt.Errorf("redislimit: %w", err)
	}
	check.Close()
	l := &Limiter{client: client, name: name, spec: sp, timeout: cfg.timeout, breaker: cfg.breaker, fail: cfg.fail, failSet: cfg.failSet,
		hooks: cfg.hooks, rt: routerFor(client), id: limiterIDs.Add(1)}
	l.argv = [4]any{strconv.Itoa(sp.kind), strconv.FormatInt(sp.a, 10), strconv.FormatInt(sp.tau, 10), strconv.FormatInt(sp.limit, 10)}
	if cfg.tag != nil {
		l.head, l.tail = cfg.prefix+"{"+*cfg.tag+"}"+name+":{", "}"
		l.ihead = cfg.prefix + "{" + *cfg.tag + "}" + name + "#{"
	} else {
		l.head, l.tail = cfg.prefix+name+":{", "}"
		l.special = cfg.prefix + name + "!{~}"
		l.ihead, l.ispec = cfg.prefix+name+"#{", cfg.prefix+name+"%{~}"
	}
	if l.breaker == nil {
		l.breaker = NewBreaker(defaultFailures, defaultCooldown)
	}
	if l.rt.cluster == nil {
		l.circ = l.breaker.circuit(l.rt.addr)
	}
	if cfg.fail.mode == failFallbackLocal {
		if l.local, err = hotlimit.New(policy, cfg.fail.opts...); err != nil {
			return nil, fmt.Errorf("redislimit: WithFallbackLocal: %w", err)
		}
	}
	if cfg.denyKeys > 0 {
		l.cache = newDenyCache(cfg.denyKeys)
	}
	if cfg.leases {
		if l.leases, err = newLeases(l, policy, cfg.maxLease, cfg.period); err != nil {
			l.Close()
			return nil, err
		}
	}
	return l, nil
}

// Name returns the limiter's name.
func (l *Limiter) Name() string { return l.name }

// RedisKey returns the Redis key that holds key's state: prefix + name +
// ":{" + key + "}", or with WithHashTag prefix + "{" + tag + "}" + name +
// ":{" + key + "}". Without a tag, a key whose braces would be empty for
// Redis Cluster (the empty key, and keys that start with "}") is stored
// as prefix + name + "!{~}" + key instead, so that on a cluster the keys
// of one identity share a slot under every limit (slot("~")). Names hold
// no braces, so the first "{" ends the name and no two limiters, nor two
// keys, share a Redis key.
func (l *Limiter) RedisKey(key string) string {
	head, tail := keyParts(l, key)
	return head + key + tail
}

// circuit returns the limiter's breaker's circuit for node.
func (l *Limiter) circuit(node string) *circuit {
	if l.circ != nil {
		return l.circ
	}
	return l.breaker.circuit(node)
}

var limiterIDs atomic.Uint64

// Allow is shorthand for AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (hotlimit.Decision, error) {
	return AllowLayers(ctx, Layer{Limiter: l, Key: key, Cost: 1})
}

// AllowN decides a request of cost for key, consuming cost if it is
// admitted, with the Decision semantics of hotlimit's Limiter.AllowN.
//
// A nil error means Redis decided. Otherwise the error wraps ErrUnavailable
// and its cause, and the Decision is the limiter's failure policy's answer;
// the call is not retried, since it may have consumed quota.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (hotlimit.Decision, error) {
	if l.leases != nil {
		if len(key) > hotlimit.MaxKeyLen {
			return hotlimit.Decision{Limit: l.spec.limit, RetryAfter: hotlimit.Never}, nil
		}
		d, _, err := l.leases.decide(ctx, key, cost)
		return d, err
	}
	return AllowLayers(ctx, Layer{Limiter: l, Key: key, Cost: cost})
}

// Close closes the in-process limiter that WithFallbackLocal built, if any,
// and in lease mode (WithLeases) waits for the refills in flight, then
// gives back what the leases hold where the policy allows (see the
// package doc, "Leases"), within the limiter's timeout. The Limiter keeps
// working after Close, except in lease mode, where it then refuses every
// request with ErrClosed (a request decided while Close runs may take
// units that are then never given back: they are lost, never admitted
// twice).
func (l *Limiter) Close() error {
	var err error
	if l.leases != nil {
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		err = l.leases.close(ctx)
		cancel()
	}
	if l.local != nil {
		return errors.Join(err, l.local.Close())
	}
	return err
}

// SweepLeases, in lease mode (WithLeases), gives back the leases of keys
// on which nothing was spent since the previous call, where the policy
// allows, and forgets those keys: call it periodically (every few lease
// periods), so that idle keys hold no budget and no memory. Otherwise it
// does nothing. The error, of the first give-back that failed, wraps
// ErrUnavailable.
func (l *Limiter) SweepLeases(ctx context.Context) error {
	if l.leases == nil {
		return nil
	}
	return l.leases.sweep(ctx)
}

// ForgetDenials drops every denial the two-tier cache holds on this
// instance (see WithLocalDenials), so that the next request on each key
// goes to Redis: use it after Redis lost its data (a flush, a restart
// without persistence), when the cached denials no longer hold.
func (l *Limiter) ForgetDenials() {
	if l.cache != nil {
		l.cache.clear()
	}
}
