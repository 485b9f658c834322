// Package bench compares hotlimit with other Go rate limiters.
//
// Everything that is measured lives in the _test.go files; this file holds
// the adapters that put each peer behind the one small interface the harness
// drives, so that `go build ./...` and `go vet ./...` see them too.
//
// Peers served by the Go module proxy and used here:
//
//	golang.org/x/time v0.16.0                 (rate.Limiter; map+Mutex and sync.Map)
//	github.com/sethvargo/go-limiter v0.7.1    (memorystore)
//	github.com/ulule/limiter/v3 v3.11.2       (memory store)
//	github.com/throttled/throttled/v2 v2.15.0 (GCRA; memstore as map and as LRU)
//	github.com/go-chi/httprate v0.16.1        (LocalCounter, sliding window)
//	go.uber.org/ratelimit v0.3.1              (single bucket, blocking)
//	github.com/juju/ratelimit v1.0.2          (single bucket, TakeAvailable)
//
// Peers refused by the Go module proxy (403 "This module version is not
// available" on the @v/list request), hence not compared:
//
//	github.com/clipperhouse/rate
//	github.com/webriots/rate
package bench

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/go-chi/httprate"
	juju "github.com/juju/ratelimit"
	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	uber "go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// keyed is the one surface the harness drives: one admission decision for
// one key. Single-bucket limiters ignore the key.
type keyed interface {
	Allow(key string) bool
}

// policy is "Rate events per second on average, bursts of up to Burst",
// the token-bucket vocabulary. Each adapter maps it onto its own model as
// closely as that model allows; the comments on each adapter say how.
type policy struct {
	Rate  float64 // events per second
	Burst int     // bucket capacity
	// Keys is the number of distinct keys the workload will use (0 when
	// unknown or small). Only limiters that must be sized up front (the
	// LRU store) use it, so that nothing is evicted during a run.
	Keys int
}

// period is the time it takes to earn Burst tokens at Rate; window-based
// limiters use it as their window so that their average rate is Rate and
// their largest burst is Burst.
func (p policy) period() time.Duration {
	return durationOf(float64(p.Burst) / p.Rate * float64(time.Second))
}

// interval is the time between two events at Rate.
func (p policy) interval() time.Duration {
	return durationOf(float64(time.Second) / p.Rate)
}

func durationOf(ns float64) time.Duration {
	if ns < 1 {
		return 1
	}
	if ns > math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return time.Duration(ns)
}

// impl describes one limiter under test.
type impl struct {
	name string
	// make builds a fresh limiter for p. The returned stop func (never nil)
	// releases whatever the limiter holds: goroutines, tickers.
	make func(p policy) (keyed, func())
	// keyedOK is false for single-bucket limiters: they are only used in
	// the one-key workloads.
	keyedOK bool
	// canDeny is false for limiters whose only admission call blocks until
	// it may proceed (uber's Take): they are only used where every call is
	// admitted anyway.
	canDeny bool
}

func noop() {}

// baselineName is the implementation every other column is compared with.
const baselineName = "xrate-map-mutex"

// peers returns every peer adapter, the baseline first.
func peers() []impl {
	return []impl{
		{name: baselineName, make: newXrateMapMutex, keyedOK: true, canDeny: true},
		{name: "xrate-syncmap", make: newXrateSyncMap, keyedOK: true, canDeny: true},
		{name: "sethvargo-memorystore", make: newSethvargo, keyedOK: true, canDeny: true},
		{name: "ulule-memory", make: newUlule, keyedOK: true, canDeny: true},
		{name: "throttled-gcra-map", make: newThrottledMap, keyedOK: true, canDeny: true},
		{name: "throttled-gcra-lru", make: newThrottledLRU, keyedOK: true, canDeny: true},
		{name: "httprate-local", make: newHTTPRate, keyedOK: true, canDeny: true},
		{name: "juju-bucket", make: newJuju, keyedOK: false, canDeny: true},
		{name: "uber-noslack", make: newUber, keyedOK: false, canDeny: false},
	}
}

// ---------------------------------------------------------------------------
// golang.org/x/time/rate: a token bucket per key; the model matches exactly.

// xrateMapMutex is the idiom most services start with: a map of
// *rate.Limiter behind one sync.Mutex, the limiter's own Allow called after
// the map lock is released (rate.Limiter has its own mutex).
type xrateMapMutex struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
}

func newXrateMapMutex(p policy) (keyed, func()) {
	return &xrateMapMutex{
		m:     make(map[string]*rate.Limiter),
		limit: rate.Limit(p.Rate),
		burst: p.Burst,
	}, noop
}

func (x *xrateMapMutex) Allow(key string) bool {
	x.mu.Lock()
	l, ok := x.m[key]
	if !ok {
		l = rate.NewLimiter(x.limit, x.burst)
		x.m[key] = l
	}
	x.mu.Unlock()
	return l.Allow()
}

// xrateSyncMap is the same with a sync.Map: Load first, LoadOrStore only
// for a key not seen yet.
type xrateSyncMap struct {
	m     sync.Map
	limit rate.Limit
	burst int
}

func newXrateSyncMap(p policy) (keyed, func()) {
	return &xrateSyncMap{limit: rate.Limit(p.Rate), burst: p.Burst}, noop
}

func (x *xrateSyncMap) Allow(key string) bool {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(x.limit, x.burst))
	}
	return v.(*rate.Limiter).Allow()
}

// ---------------------------------------------------------------------------
// github.com/sethvargo/go-limiter memorystore.
//
// Model: Tokens per Interval, the bucket holding at most Tokens. We map
// Burst -> Tokens and Burst/Rate -> Interval. Semantics differ from a token
// bucket: tokens come back only when a whole Interval has ticked, and then
// the bucket is *set* to ticks*Interval/Tokens with Interval in
// nanoseconds (capped at Tokens) rather than topped up by ticks*Tokens; so
// whenever Interval(ns)/Tokens < Tokens, i.e. Rate*Burst > 1e9 (e.g. 1e6/s
// burst 1e6: 1,000 tokens per 1 s tick instead of 1e6), a tick refills far
// fewer than Tokens. The denied/op metric of the benchmarks makes that visible. It
// starts a sweeper goroutine (6 h default interval), stopped by Close.

type sethvargo struct {
	s   golimiter.Store
	ctx context.Context
}

func newSethvargo(p policy) (keyed, func()) {
	s, err := memorystore.New(&memorystore.Config{
		Tokens:   uint64(p.Burst),
		Interval: p.period(),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	return &sethvargo{s: s, ctx: ctx}, func() { _ = s.Close(ctx) }
}

func (x *sethvargo) Allow(key string) bool {
	_, _, _, ok, err := x.s.Take(x.ctx, key)
	return ok && err == nil
}

// ---------------------------------------------------------------------------
// github.com/ulule/limiter/v3 with its memory store.
//
// Model: fixed window, Limit events per Period, the counter reset when its
// Period has expired (the period starts at a key's first event, not on a
// wall-clock boundary). We map Burst -> Limit and Burst/Rate -> Period, so
// the average rate matches, but up to 2*Burst can pass around a window
// edge. The store prefixes every key ("limiter:"+key), which builds a new
// string on every call; that cost is the library's and is measured. The
// store's cleaner goroutine is disabled (CleanUpInterval 0) because it can
// only be stopped by a finalizer, and it would not fire within a benchmark
// anyway (30 s default); hotlimit runs with its sweeper off as well.

type ululeLimiter struct {
	l   *ulule.Limiter
	ctx context.Context
}

func newUlule(p policy) (keyed, func()) {
	store := ululemem.NewStoreWithOptions(ulule.StoreOptions{
		Prefix:          ulule.DefaultPrefix,
		CleanUpInterval: 0,
	})
	l := ulule.New(store, ulule.Rate{Period: p.period(), Limit: int64(p.Burst)})
	return &ululeLimiter{l: l, ctx: context.Background()}, noop
}

func (x *ululeLimiter) Allow(key string) bool {
	c, err := x.l.Get(x.ctx, key)
	return err == nil && !c.Reached
}

// ---------------------------------------------------------------------------
// github.com/throttled/throttled/v2 GCRA.
//
// GCRA is equivalent to a token bucket: emission interval 1/Rate and a
// tolerance of MaxBurst+1 intervals, so MaxBurst = Burst-1 gives a bucket of
// Burst. The memstore keeps one int64 (the theoretical arrival time) per key
// and updates it by compare-and-swap; after 10 failed swaps in a row
// (heavy contention on one key) RateLimitCtx returns an error, which we
// count as a denial. Two stores: a plain map behind an RWMutex (maxKeys 0,
// unbounded) and hashicorp's LRU cache (maxKeys > 0, one global lock,
// every Get moves the entry to the front).

type throttledGCRA struct {
	l   *throttled.GCRARateLimiterCtx
	ctx context.Context
}

func newThrottled(p policy, maxKeys int) (keyed, func()) {
	store, err := memstore.NewCtx(maxKeys)
	if err != nil {
		panic(err)
	}
	l, err := throttled.NewGCRARateLimiterCtx(store, throttled.RateQuota{
		MaxRate:  throttled.PerDuration(1, p.interval()),
		MaxBurst: p.Burst - 1,
	})
	if err != nil {
		panic(err)
	}
	return &throttledGCRA{l: l, ctx: context.Background()}, noop
}

func newThrottledMap(p policy) (keyed, func()) { return newThrottled(p, 0) }

// lruMinKeys is the LRU capacity when the workload does not say how many
// keys it uses; large enough for every one-key and insert workload here.
const lruMinKeys = 1 << 16

func newThrottledLRU(p policy) (keyed, func()) {
	n := p.Keys + p.Keys/8 // headroom: nothing the workload uses is evicted
	if n < lruMinKeys {
		n = lruMinKeys
	}
	return newThrottled(p, n)
}

func (x *throttledGCRA) Allow(key string) bool {
	limited, _, err := x.l.RateLimitCtx(x.ctx, key, 1)
	return err == nil && !limited
}

// ---------------------------------------------------------------------------
// github.com/go-chi/httprate: the in-memory LocalCounter.
//
// Model: sliding-window estimate over two fixed windows of length Window:
// estimate = previous*(remaining fraction of window) + current, admit if
// round(estimate)+1 <= Limit. We map Burst -> Limit and Burst/Rate ->
// Window. The counter only counts (and keys its maps by xxh3 of the key);
// the decision lives in httprate.RateLimiter.OnLimit, which needs an
// http.ResponseWriter and *http.Request and writes headers. So this adapter
// uses the public LocalCounter through its LimitCounter interface and makes
// the same decision OnLimit makes, under one mutex as OnLimit does (the
// counter's own RWMutex is taken inside as well), minus the HTTP headers.
// Windows are aligned to the wall clock (RateLimiter aligns them to its
// start instant; the difference does not matter for throughput).

type httprateLocal struct {
	mu     sync.Mutex
	c      httprate.LimitCounter
	limit  int
	window time.Duration
}

func newHTTPRate(p policy) (keyed, func()) {
	w := p.period()
	return &httprateLocal{
		c:      httprate.NewLocalLimitCounter(w),
		limit:  p.Burst,
		window: w,
	}, noop
}

func (x *httprateLocal) Allow(key string) bool {
	now := time.Now().UTC()
	cur := now.Truncate(x.window)
	prev := cur.Add(-x.window)

	x.mu.Lock()
	curCount, prevCount, err := x.c.Get(key, cur, prev)
	if err != nil {
		x.mu.Unlock()
		return false
	}
	elapsed := now.Sub(cur)
	est := float64(prevCount)*(float64(x.window)-float64(elapsed))/float64(x.window) + float64(curCount)
	if int(math.Round(est))+1 > x.limit {
		x.mu.Unlock()
		return false
	}
	err = x.c.IncrementBy(key, cur, 1)
	x.mu.Unlock()
	return err == nil
}

// ---------------------------------------------------------------------------
// Single-bucket limiters: the key is ignored; one-key rows only.

// juju's Bucket is a token bucket of Burst refilled at Rate; TakeAvailable
// never blocks, so it is a fair one-key peer for allow and deny paths.
type jujuBucket struct{ b *juju.Bucket }

func newJuju(p policy) (keyed, func()) {
	return jujuBucket{b: juju.NewBucketWithRate(p.Rate, int64(p.Burst))}, noop
}

func (x jujuBucket) Allow(string) bool { return x.b.TakeAvailable(1) == 1 }

// uber's Limiter has only Take, which sleeps until the caller may proceed:
// it never denies. It is only used in the one-key allow rows, built
// WithoutSlack at Rate capped to 1e9/s (1 ns between events), so that a
// call normally finds its slot already in the past and does not sleep;
// under contention a few calls can still land in the future and sleep for
// a few nanoseconds (a real park), which is part of what it costs. Burst
// has no counterpart.
type uberLimiter struct{ l uber.Limiter }

func newUber(p policy) (keyed, func()) {
	r := p.Rate
	if r > 1e9 {
		r = 1e9
	}
	if r < 1 {
		r = 1
	}
	return uberLimiter{l: uber.New(int(r), uber.WithoutSlack)}, noop
}

func (x uberLimiter) Allow(string) bool {
	x.l.Take()
	return true
}
