package lease

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/hotlimit/hotlimit/redislimit/internal/bridge"
	"github.com/redis/go-redis/v9"
)

//go:embed lease.lua
var leaseSource string

// leaseScript is the common start of redislimit's scripts (the instant,
// from ARGV[1]), then lease.lua, run through a redislimit.Limiter (see
// redislimit/internal/bridge).
var leaseScript = bridge.NewScript(leaseSource)

const (
	kindTokenBucket = 1
	kindFixedWindow = 2
	maxMicros       = 1 << 50
	never           = math.MaxInt64
)

// Errors returned with a decision that Redis did not make.
var (
	// ErrUnavailable wraps every failure to take a lease from Redis
	// (timeout, network error, reply error); the failure policy answered.
	ErrUnavailable = errors.New("lease: Redis could not decide")
	// ErrClosed: the Limiter was closed; the request is denied.
	ErrClosed = errors.New("lease: limiter closed")
)

// Limiter is a keyed rate limiter whose budget is shared, through Redis,
// by every instance that uses the same Redis, prefix, name and policy, and
// whose decisions are made in process from units leased from that budget.
// See the package doc for the contract and its bounds. A Limiter is safe
// for concurrent use and must not be copied; create one with New.
type Limiter struct {
	sync     *redislimit.Limiter // every call to Redis goes through it: its options, routing, breaker, hooks and failure policy
	kind     int
	a        int64 // T or W, µs
	limit    int64
	argv     [4]any // kind, a, tau, limit for the script
	maxLease int64
	period   int64 // ns
	timeout  time.Duration
	failOpen bool // WithFailOpen was given
	clock    hotlimit.Clock
	keys     sync.Map // key → *entry
	closed   atomic.Bool
	bg       sync.WaitGroup // background refills

	// testNow, when set, is the script's instant in µs instead of the
	// server's TIME. Only this package's tests set it.
	testNow func() int64
}

// entry is one key's lease on this instance.
type entry struct {
	cur  atomic.Pointer[grant]
	busy atomic.Bool // a take or give for this key is in flight
	dead atomic.Bool // removed by Sweep: look the key up again

	deny atomic.Pointer[denial] // Redis's last denial of a take for this key, or nil

	issued atomic.Int64 // units ever granted into the lease

	// Guarded by busy.
	stamp     int64 // what the last take into the lease replied (TAT or window index)
	inc       int64 // and the incarnation of the key's state it was taken from (lease.lua)
	lastGrant int64 // units of that take still undoable by a give
	lastAt    int64 // clock ns of the previous refill
	lastSpent int64 // units spent by then

	swept atomic.Int64 // units spent at the previous Sweep

	resetAt atomic.Int64 // clock ns: when the shared state was fresh again as of the last take (token bucket)
}

// denial is a take Redis refused: it refuses every take of at least cost
// until the clock reads until (ns), unless units are given back meanwhile.
type denial struct{ until, cost int64 }

// grant is a lease: units that Redis debited and that may be spent here
// until end (clock ns; never for a token bucket).
type grant struct {
	avail atomic.Int64
	low   atomic.Int64 // a refill is sent when avail drops to low
	end   int64
	win   int64 // the window index (fixed window)
}

var deadGrant = &grant{}

// Option configures a Limiter.
type Option func(*config) error

type config struct {
	redis    []redislimit.Option
	prefix   string
	maxLease int64
	period   time.Duration
	timeout  time.Duration
	failOpen bool
	clock    hotlimit.Clock
}

// WithPrefix sets the start of every Redis key (default "hotlimit:"); it
// must not contain a brace.
func WithPrefix(p string) Option {
	return func(c *config) error {
		if strings.ContainsAny(p, "{}") {
			return fmt.Errorf("lease: WithPrefix: prefix %q contains a brace", p)
		}
		c.prefix = p
		return nil
	}
}

// WithMaxLease bounds the units one instance holds unspent per key
// (default: a tenth of the limit, at least 1). It is the price of the
// mode: with n instances, at most n·max units of a key's budget sit
// unused in leases at any instant.
func WithMaxLease(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("lease: WithMaxLease: %d must be ≥ 1", n)
		}
		c.maxLease = n
		return nil
	}
}

// WithPeriod sets how long a lease should last at the key's recent local
// rate (default 100ms): a refill asks for the units spent over the last
// refill interval scaled to one period, within [1, WithMaxLease].
func WithPeriod(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("lease: WithPeriod: %v must be > 0", d)
		}
		c.period = d
		return nil
	}
}

// WithTimeout bounds each call to Redis (default 100ms).
func WithTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("lease: WithTimeout: %v must be > 0", d)
		}
		c.timeout = d
		return nil
	}
}

// WithFailOpen admits, rather than denies (the default, fail closed), a
// request that neither the lease nor Redis could decide. The call still
// returns the error.
func WithFailOpen() Option {
	return func(c *config) error { c.failOpen = true; return nil }
}

// WithRedis gives the limiter opts as redislimit.New takes them: every
// call to Redis then goes through a redislimit.Limiter with those options
// (WithHashTag, WithTimeout, WithBreaker, WithHooks, WithFailurePolicy,
// ...), with its routing on a Redis Cluster (MOVED and ASK followed), its
// node's circuit, its hooks, and its failure policy when Redis cannot
// decide. They come after, and so override, this package's WithPrefix,
// WithTimeout and WithFailOpen. WithLocalDenials has no effect here: a
// lease keeps Redis's denials itself.
func WithRedis(opts ...redislimit.Option) Option {
	return func(c *config) error {
		c.redis = append(c.redis, opts...)
		return nil
	}
}

// WithClock sets the clock that fixed-window leases expire by (default
// hotlimit.SystemClock). It must be monotonic and run at the rate of the
// Redis server's clock.
func WithClock(clk hotlimit.Clock) Option {
	return func(c *config) error {
		if clk == nil {
			return errors.New("lease: WithClock: nil clock")
		}
		c.clock = clk
		return nil
	}
}

// New returns a Limiter for policy (hotlimit.TokenBucket or FixedWindow,
// or a pointer to one) whose budget lives in Redis through client under
// name. The client must not retry commands (MaxRetries: -1) and must apply
// context deadlines (ContextTimeoutEnabled: true), as redislimit.New
// requires: a retried take could debit twice. New makes no call to Redis.
func New(client redis.Scripter, name string, policy hotlimit.Policy, opts ...Option) (*Limiter, error) {
	cfg, err := configure(opts)
	if err != nil {
		return nil, err
	}
	// The synchronous limiter checks the client (no retries, deadlines
	// applied), the name and the policy as this one needs them checked,
	// and makes every call to Redis.
	ropts := []redislimit.Option{redislimit.WithPrefix(cfg.prefix), redislimit.WithTimeout(cfg.timeout)}
	if cfg.failOpen {
		ropts = append(ropts, redislimit.WithFailurePolicy(redislimit.FailOpen))
	}
	sl, err := redislimit.New(client, name, policy, append(ropts, cfg.redis...)...)
	if err != nil {
		return nil, fmt.Errorf("lease: %w", err)
	}
	return newOn(sl, policy, cfg)
}

// configure applies opts to the defaults.
func configure(opts []Option) (config, error) {
	cfg := config{prefix: "hotlimit:", period: 100 * time.Millisecond, timeout: 100 * time.Millisecond, clock: hotlimit.SystemClock{}}
	for _, o := range opts {
		if o == nil {
			return cfg, errors.New("lease: nil Option")
		}
		if err := o(&cfg); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// newOn returns a Limiter for policy that makes its calls through sl.
func newOn(sl *redislimit.Limiter, policy hotlimit.Policy, cfg config) (*Limiter, error) {
	l := &Limiter{sync: sl, period: int64(cfg.period), timeout: cfg.timeout, failOpen: cfg.failOpen, clock: cfg.clock}
	var tau int64
	switch p := policy.(type) {
	case *hotlimit.TokenBucket:
		if p == nil {
			return nil, errors.New("lease: nil *hotlimit.TokenBucket")
		}
		return newOn(sl, *p, cfg)
	case *hotlimit.FixedWindow:
		if p == nil {
			return nil, errors.New("lease: nil *hotlimit.FixedWindow")
		}
		return newOn(sl, *p, cfg)
	case hotlimit.TokenBucket:
		if p.Rate.N <= 0 || p.Rate.Per <= 0 || p.Burst <= 0 {
			return nil, fmt.Errorf("lease: TokenBucket needs Rate.N > 0, Rate.Per > 0 and Burst > 0, got %+v", p)
		}
		t := int64((p.Rate.Interval()-1)/time.Microsecond) + 1 // rounded up, towards denying
		if p.Burst > maxMicros/t {
			return nil, fmt.Errorf("lease: TokenBucket.Burst %d × interval %dµs exceeds 2^50µs", p.Burst, t)
		}
		l.kind, l.a, l.limit, tau = kindTokenBucket, t, p.Burst, p.Burst*t
	case hotlimit.FixedWindow:
		w := p.Window
		if p.Limit <= 0 || p.Limit > maxMicros || w <= 0 || w%time.Microsecond != 0 || w/time.Microsecond > maxMicros {
			return nil, fmt.Errorf("lease: FixedWindow needs 0 < Limit ≤ 2^50 and a Window of 1µs to 2^50µs in whole µs, got %+v", p)
		}
		l.kind, l.a, l.limit = kindFixedWindow, int64(w/time.Microsecond), p.Limit
	default:
		return nil, fmt.Errorf("lease: policy %T is not supported (use hotlimit.TokenBucket or FixedWindow)", policy)
	}
	l.maxLease = cfg.maxLease
	if l.maxLease == 0 {
		l.maxLease = max(1, l.limit/10)
	}
	l.maxLease = min(l.maxLease, l.limit)
	l.argv = [4]any{strconv.Itoa(l.kind), strconv.FormatInt(l.a, 10), strconv.FormatInt(tau, 10), strconv.FormatInt(l.limit, 10)}
	return l, nil
}

// RedisKey returns the Redis key that holds key's shared state, named as
// redislimit names it (WithRedis(redislimit.WithHashTag(tag)) included).
func (l *Limiter) RedisKey(key string) string { return l.sync.RedisKey(key) }

// Limit returns the policy's Burst or Limit.
func (l *Limiter) Limit() int64 { return l.limit }

// MaxLease returns the most units this instance holds unspent per key.
func (l *Limiter) MaxLease() int64 { return l.maxLease }

// Allow is AllowN(ctx, key, 1).
func (l *Limiter) Allow(ctx context.Context, key string) (bool, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether a request of cost units on key is admitted, and
// spends them if so: Decide's Allowed.
func (l *Limiter) AllowN(ctx context.Context, key string, cost int64) (bool, error) {
	if cost <= 0 || cost > l.limit {
		return cost == 0, nil
	}
	// spend, written out: AllowN is the hot path, and needs no clock read
	// for a token bucket (no ResetAfter to report).
	e := l.lookup(key)
	if e != nil {
		g := e.cur.Load()
		if g.end == never || l.clock.Now() < time.Duration(g.end) {
			for {
				a := g.avail.Load()
				if a < cost {
					break
				}
				if g.avail.CompareAndSwap(a, a-cost) {
					if a-cost <= g.low.Load() && !e.busy.Load() {
						l.startRefill(e, key)
					}
					return true, nil
				}
			}
		}
	}
	d, _, err := l.slow(ctx, key, e, cost)
	return d.Allowed, err
}

// Decide decides a request of cost units on key, spending them if it is
// admitted, and reports it as a hotlimit.Decision. While the key's lease
// holds cost units it decides in process, without a lock, an allocation
// or a round trip. Otherwise it takes a lease of at least cost units from
// Redis before answering. A cost of 0 is admitted and spends nothing; a
// negative cost or one above the limit is denied with RetryAfter =
// hotlimit.Never.
//
// What an instance can know of a budget it shares, the Decision says
// within these bounds (see the package doc):
//   - Limit is the policy's Burst or Limit.
//   - Remaining is the units this instance's lease holds for the key after
//     the decision: what it admits next without a round trip. The shared
//     budget may hold more (Redis lends it on the next take), or less
//     (the other instances hold leases too).
//   - RetryAfter, for a request Redis refused, is Redis's: the wait after
//     which the shared state admits the same cost if nothing else
//     consumes, counted from when the take was sent (a refusal answered
//     from this instance's memory of it is counted down). 0 when admitted.
//   - ResetAfter is the time until the shared state is fresh again as the
//     last take from this instance saw it, counted down: a lower bound,
//     since other instances may have consumed since (for a fixed window,
//     exactly the time to the window's end).
//
// A non-nil error wraps ErrUnavailable (Redis could not decide: the
// failure policy answered, see WithFailOpen and WithRedis) or is
// ErrClosed.
func (l *Limiter) Decide(ctx context.Context, key string, cost int64) (hotlimit.Decision, error) {
	d, _, err := l.decide(ctx, key, cost)
	return d, err
}

// decide is Decide that also returns, for an admission by a lease, the
// grant the units were spent from, to which they may be given back
// (Backend: a later layer refused); nil when nothing was spent from one.
func (l *Limiter) decide(ctx context.Context, key string, cost int64) (hotlimit.Decision, *grant, error) {
	if cost <= 0 || cost > l.limit {
		if cost == 0 {
			return l.peek(key), nil, nil
		}
		return hotlimit.Decision{Limit: l.limit, RetryAfter: hotlimit.Never}, nil, nil
	}
	e := l.lookup(key)
	if e != nil {
		// The bucket's reset as of the last take before this decision:
		// spend may start a refill, whose take would be after it.
		at := e.resetAt.Load()
		if g, a, ok := l.spend(e, key, cost); ok {
			now := int64(l.clock.Now())
			if g.end != never {
				at = g.end
			}
			return hotlimit.Decision{Allowed: true, Limit: l.limit, Remaining: a - cost, ResetAfter: time.Duration(max(0, at-now))}, g, nil
		}
	}
	return l.slow(ctx, key, e, cost)
}

// spend takes cost units from e's lease if it holds them, in process, and
// reports the grant and the units it held before. It starts a refill in
// the background when the lease drops to its low-water mark. It reads the
// clock only for a fixed window (whose grant ends).
func (l *Limiter) spend(e *entry, key string, cost int64) (*grant, int64, bool) {
	g := e.cur.Load()
	if g.end != never && int64(l.clock.Now()) >= g.end {
		return nil, 0, false
	}
	for {
		a := g.avail.Load()
		if a < cost {
			return nil, 0, false
		}
		if g.avail.CompareAndSwap(a, a-cost) {
			if a-cost <= g.low.Load() && !e.busy.Load() {
				l.startRefill(e, key)
			}
			return g, a, true
		}
	}
}

// resetAfter is Decision.ResetAfter for e at now, whose grant is g.
func (l *Limiter) resetAfter(e *entry, g *grant, now int64) time.Duration {
	at := e.resetAt.Load()
	if g.end != never {
		at = g.end
	}
	return time.Duration(max(0, at-now))
}

// held returns the units e's grant holds and may spend at now, and the
// grant.
func (e *entry) held(now int64) (int64, *grant) {
	g := e.cur.Load()
	if g.end != never && now >= g.end {
		return 0, g
	}
	return g.avail.Load(), g
}

// peek is Decide of cost 0: admitted, spending nothing, with the state
// the lease holds.
func (l *Limiter) peek(key string) hotlimit.Decision {
	d := hotlimit.Decision{Allowed: true, Limit: l.limit}
	if e := l.lookup(key); e != nil {
		now := int64(l.clock.Now())
		var g *grant
		d.Remaining, g = e.held(now)
		d.ResetAfter = l.resetAfter(e, g, now)
	}
	return d
}

// after returns the Decision of a request on e decided at now: admitted
// or not, with the lease's state as it is now and, when denied, the wait
// Redis gave (retry, ns from now; Never when it can never be admitted).
func (l *Limiter) after(e *entry, now int64, ok bool, retry time.Duration) hotlimit.Decision {
	rem, g := e.held(now)
	d := hotlimit.Decision{Allowed: ok, Limit: l.limit, Remaining: rem, ResetAfter: l.resetAfter(e, g, now)}
	if !ok {
		d.RetryAfter = max(retry, 1)
	}
	return d
}

// lookup returns key's entry, or nil. A sync.Map's Load of a key that is
// present takes no lock and, for a string key, allocates nothing.
func (l *Limiter) lookup(key string) *entry {
	if v, ok := l.keys.Load(key); ok {
		return v.(*entry)
	}
	return nil
}

// entry returns key's entry, adding it if absent.
func (l *Limiter) entry(key string) *entry {
	if e := l.lookup(key); e != nil {
		return e
	}
	e := &entry{lastAt: int64(l.clock.Now())}
	e.cur.Store(deadGrant)
	v, _ := l.keys.LoadOrStore(key, e)
	return v.(*entry)
}

// spent returns the units spent from e's leases so far.
func (e *entry) spent() int64 {
	g := e.cur.Load()
	return e.issued.Load() - g.avail.Load()
}

// startRefill sends a background take for key if none is in flight.
func (l *Limiter) startRefill(e *entry, key string) {
	if !e.busy.CompareAndSwap(false, true) {
		return
	}
	if l.closed.Load() {
		e.busy.Store(false)
		return
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		defer e.busy.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		defer cancel()
		l.refill(ctx, e, key, 0)
	}()
}

// want returns the units a take should ask for beyond need: the key's
// rate over the last refill interval scaled to a period, so that held +
// need + want ≤ maxLease. Called with busy held.
func (l *Limiter) want(e *entry, need int64) int64 {
	now := int64(l.clock.Now())
	spent := e.spent()
	// The units spent since the previous refill, scaled from the time
	// they took to a period; all of them at once (dt 0) is a rate above
	// any bound, and no units spent, or no history, asks for 1.
	w, ds := int64(1), spent-e.lastSpent
	if dt := now - e.lastAt; ds > 0 && dt <= 0 {
		w = l.maxLease
	} else if ds > 0 {
		w = int64(min(math.Ceil(float64(ds)*float64(l.period)/float64(dt)), float64(l.maxLease)))
	}
	e.lastAt, e.lastSpent = now, spent
	held := int64(0)
	if g := e.cur.Load(); g.end == never || now < g.end {
		held = g.avail.Load()
	}
	w = min(max(w, 1), l.maxLease-held-need)
	return max(w, 0)
}

// refill takes up to want units into e's lease, need of them for the
// caller (spent at once) and the rest kept. It reports whether need was
// granted. Called with busy held.
func (l *Limiter) refill(ctx context.Context, e *entry, key string, need int64) (bool, error) {
	w := l.want(e, need)
	if need == 0 && w == 0 {
		return false, nil
	}
	sent := int64(l.clock.Now())
	r, err := l.take(ctx, key, max(need, 1), need+w)
	if err != nil {
		return false, err
	}
	if r.granted == 0 {
		l.denied(e, sent, need, r.retry)
		return false, nil
	}
	keep := r.granted - need
	e.issued.Add(r.granted) // need is spent at once
	if l.kind == kindTokenBucket {
		g := e.cur.Load()
		if g == deadGrant {
			g = &grant{end: never}
			g.avail.Store(keep)
			e.cur.Store(g)
		} else {
			g.avail.Add(keep)
		}
		if keep > 0 {
			g.low.Store(keep / 2)
		}
		e.stamp, e.inc, e.lastGrant = r.stamp, r.inc, keep
		e.resetAt.Store(sent + r.left*int64(time.Microsecond))
		return true, nil
	}
	g := e.cur.Load()
	if g != deadGrant && g.win == r.stamp && sent < g.end {
		g.avail.Add(keep)
		if r.inc == e.inc {
			e.lastGrant += keep
		} else {
			// The state was deleted (Reset) and created again since the
			// last take: only this take's units are owed by it.
			e.lastGrant = keep
		}
	} else {
		// A new window, or the same one after this instance's deadline
		// for it (which comes a round trip early at most): the old
		// lease's units are dead; dropping them from issued keeps
		// spent() right.
		ng := &grant{end: sent + r.left*int64(time.Microsecond), win: r.stamp}
		ng.avail.Store(keep)
		e.issued.Add(-g.avail.Swap(0))
		e.cur.Store(ng)
		g = ng
		e.lastGrant = keep
	}
	if keep > 0 {
		g.low.Store(keep / 2)
	}
	e.stamp, e.inc = r.stamp, r.inc
	return true, nil
}

// denied notes that Redis refused cost units until retry µs after sent:
// until then this instance denies requests of at least cost locally.
func (l *Limiter) denied(e *entry, sent, cost, retry int64) {
	if cost > 0 && retry > 0 {
		e.deny.Store(&denial{until: sent + retry*int64(time.Microsecond), cost: cost})
	}
}

// slow decides a request the lease could not: one take from Redis.
func (l *Limiter) slow(ctx context.Context, key string, e *entry, cost int64) (hotlimit.Decision, *grant, error) {
	if l.closed.Load() {
		return hotlimit.Decision{Limit: l.limit, RetryAfter: hotlimit.Never}, nil, ErrClosed
	}
	if e == nil || e.dead.Load() {
		e = l.entry(key)
	}
	now := int64(l.clock.Now())
	// Redis's denial of this same cost answers until it ends: a larger
	// cost needs longer, by a wait only Redis can say.
	if d := e.deny.Load(); d != nil && now < d.until && cost == d.cost {
		return l.after(e, now, false, time.Duration(d.until-now)), nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if e.busy.CompareAndSwap(false, true) {
		if e.dead.Load() { // swept meanwhile: units taken now would be lost
			e.busy.Store(false)
			return l.slow(ctx, key, nil, cost)
		}
		ok, err := l.refill(ctx, e, key, cost)
		e.busy.Store(false)
		return l.answer(e, key, cost, ok, err)
	}
	// A take is in flight for the lease; it may have landed.
	if g := e.cur.Load(); g.end == never || now < g.end {
		for a := g.avail.Load(); a >= cost; a = g.avail.Load() {
			if g.avail.CompareAndSwap(a, a-cost) {
				return hotlimit.Decision{Allowed: true, Limit: l.limit, Remaining: a - cost, ResetAfter: l.resetAfter(e, g, now)}, g, nil
			}
		}
	}
	// Take exactly cost.
	r, err := l.take(ctx, key, cost, cost)
	if err == nil && r.granted == 0 {
		l.denied(e, now, cost, r.retry)
	}
	if err == nil && r.granted > 0 && l.kind == kindTokenBucket {
		e.resetAt.Store(now + r.left*int64(time.Microsecond))
	}
	return l.answer(e, key, cost, r.granted > 0, err)
}

// answer returns the Decision of a request of cost on key, which a take
// decided (ok) or could not decide (err: the failure policy answers), and
// the grant an admission's units may be given back to.
func (l *Limiter) answer(e *entry, key string, cost int64, ok bool, err error) (hotlimit.Decision, *grant, error) {
	if err != nil {
		return bridge.Fail(l.sync, key, cost, err), nil, err
	}
	now := int64(l.clock.Now())
	var retry time.Duration
	if d := e.deny.Load(); !ok && d != nil && d.cost == cost {
		retry = time.Duration(d.until - now)
	}
	var g *grant
	if ok {
		// The units were spent as they were taken; they may go back into
		// the key's grant (never into the shared deadGrant: no lease).
		if g = e.cur.Load(); g == deadGrant {
			g = nil
		}
	}
	return l.after(e, now, ok, retry), g, nil
}

// call runs lease.lua on key's Redis key with args, through the
// synchronous limiter (routing, circuit, timeout, Call hook).
func (l *Limiter) call(ctx context.Context, key string, args ...any) ([]int64, error) {
	return bridge.Call(ctx, l.sync, leaseScript, key, args...)
}

type reply struct {
	granted, stamp, left, retry, inc int64
}

func (l *Limiter) now() string {
	if l.testNow != nil {
		return strconv.FormatInt(l.testNow(), 10)
	}
	return ""
}

func (l *Limiter) take(ctx context.Context, key string, lo, want int64) (reply, error) {
	v, err := l.call(ctx, key, l.now(), "take", l.argv[0], l.argv[1], l.argv[2], l.argv[3], lo, want)
	if err != nil {
		return reply{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch {
	case len(v) == 2 && v[0] == 0:
		return reply{retry: v[1]}, nil
	case len(v) == 4 && v[0] >= lo && v[0] <= want:
		return reply{granted: v[0], stamp: v[1], left: v[2], inc: v[3]}, nil
	}
	return reply{}, fmt.Errorf("%w: unexpected reply %v", ErrUnavailable, v)
}

// giveBack returns e's unspent units to Redis where the policy allows it
// (see the package doc) and empties the lease. Called with busy held.
func (l *Limiter) giveBack(ctx context.Context, e *entry, key string) error {
	g := e.cur.Load()
	r := min(g.avail.Swap(0), e.lastGrant)
	e.lastGrant = 0
	if r <= 0 || (g.end != never && int64(l.clock.Now()) >= g.end) {
		return nil
	}
	_, err := l.call(ctx, key, l.now(), "give", l.argv[0], l.argv[1], l.argv[2], l.argv[3], r, e.stamp, e.inc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// Sweep gives back the leases of keys on which nothing was spent since the
// previous Sweep and forgets those keys. Call it periodically (every few
// periods) so that idle keys hold no budget and no memory.
func (l *Limiter) Sweep(ctx context.Context) error {
	var first error
	for k, v := range l.keys.Range {
		key, e := k.(string), v.(*entry)
		sp := e.spent()
		if e.swept.Swap(sp) != sp || !e.busy.CompareAndSwap(false, true) {
			continue
		}
		e.dead.Store(true)
		l.keys.CompareAndDelete(key, e)
		if err := l.giveBack(ctx, e, key); err != nil && first == nil {
			first = err
		}
		e.busy.Store(false)
	}
	return first
}

// Close waits for the refills in flight, then gives back every unspent
// lease (where the policy allows) and denies later requests with
// ErrClosed. It must not run concurrently with AllowN.
func (l *Limiter) Close(ctx context.Context) error {
	if l.closed.Swap(true) {
		return nil
	}
	l.bg.Wait()
	var first error
	for k, v := range l.keys.Range {
		if err := l.giveBack(ctx, v.(*entry), k.(string)); err != nil && first == nil {
			first = err
		}
	}
	return first
}
