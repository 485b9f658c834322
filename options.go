package hotlimit

import (
	"fmt"
	"time"
)

// Option configures a Limiter.
type Option func(*config)

type config struct {
	onDeny     func(keyHash uint64, d Decision)
	clock      Clock
	coarse     time.Duration
	shards     int
	maxKeys    int
	sweepEvery time.Duration
	err        error
}

func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("hotlimit: "+format, args...)
	}
}

const maxShards = 1 << 16

// defaultShards is the shard count when WithShards is not given, lowered
// to maxKeys/4 (at least 1) under a smaller WithMaxKeys: eviction draws its
// sample from slots across every shard (see gc.go), and a full limiter of
// n keys keeps that draw dense only while shards × table length stays
// within a small multiple of n. With 256 shards of at least 8 slots and a
// handful of keys, every eviction would scan all 2,048 slots instead.
const defaultShards = 256

// shardCount is the shard count to build, before rounding up to a power
// of two.
func (c *config) shardCount() int {
	if c.shards > 0 {
		return c.shards
	}
	if c.maxKeys > 0 {
		return min(defaultShards, max(1, c.maxKeys/4))
	}
	return defaultShards
}

// WithClock makes the limiter read time from c instead of the default
// clock. Use a ManualClock in tests.
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c == nil {
			cfg.fail("WithClock: nil Clock")
		}
		cfg.clock = c
	}
}

// WithCoarseClock makes the limiter read a cached clock refreshed every
// resolution by a goroutine that Close stops. See CoarseClock for what
// this trades: decisions save a clock read; denials are re-checked on the
// precise clock; but on real time an admission can be booked up to the
// cache's lag early, which lets a bucket admit up to lag/T extra units
// over an interval.
func WithCoarseClock(resolution time.Duration) Option {
	return func(cfg *config) {
		if resolution <= 0 || resolution > time.Second {
			cfg.fail("WithCoarseClock: resolution must be in (0, 1s], got %v", resolution)
		}
		cfg.coarse = resolution
	}
}

// WithDenyHook calls hook, synchronously, for every request that AllowN
// (or Allow, AllowBytes, AllowLayers' layers) denies, with the denial and
// the key's hash instead of the key: the limiter's seeded 64-bit hash,
// stable for the limiter's life and meaningless outside it, so a log or a
// metric can group denials by client without holding tokens or addresses.
// The allow path does not look at the hook. The hook must be fast and must
// not block; it may call the limiter. Wait on a window policy tries again
// through AllowN, so each denied try calls it; the admissions AllowLayers
// gives back do not.
func WithDenyHook(hook func(keyHash uint64, d Decision)) Option {
	return func(cfg *config) {
		if hook == nil {
			cfg.fail("WithDenyHook: nil hook")
		}
		cfg.onDeny = hook
	}
}

// WithShards sets the number of shards the keyed table is split into,
// rounded up to a power of two. Decisions on existing keys take no lock;
// inserting and removing keys take their shard's mutex, so more shards
// let more insertions proceed at once. The default is 256, or
// WithMaxKeys' n/4 (at least 1) when that is fewer, so that making room
// for a new key in a small limiter samples its few keys directly instead
// of scanning hundreds of nearly empty shards; given explicitly, n is kept
// as given. n must be in [1, 65536].
func WithShards(n int) Option {
	return func(cfg *config) {
		if n < 1 || n > maxShards {
			cfg.fail("WithShards: n must be in [1, %d], got %d", maxShards, n)
		}
		cfg.shards = n
	}
}

// WithMaxKeys bounds the number of keys held: Len() ≤ n at all times. To
// make room for a new key the limiter looks at 4 distinct keys drawn
// uniformly at random from all it holds and removes the one closest to
// fresh (the fewest units used, then the soonest reset; ties at random),
// so a flood of new keys cannot reset a drained key while fresher ones
// exist: a key with A others at least as drained is removed by one
// eviction with probability at most C(A, 3)/C(n, 4), and never when A < 3
// while the limiter holds 4 keys or more; with fewer, every key is
// compared, and a key with no other as drained is never removed. Both
// hold however many goroutines insert new keys at once.
// (The sliding log draws its 4 keys stripe by stripe, less uniformly.)
// 0 means unbounded.
func WithMaxKeys(n int) Option {
	return func(cfg *config) {
		if n < 0 {
			cfg.fail("WithMaxKeys: n must be ≥ 0, got %d", n)
		}
		cfg.maxKeys = n
	}
}

// WithSweepInterval sets how often the background sweeper removes keys
// whose state is fresh (which changes no decision). The default is one
// minute; 0 disables the sweeper (call Sweep yourself, or rely on
// WithMaxKeys).
func WithSweepInterval(d time.Duration) Option {
	return func(cfg *config) {
		if d < 0 {
			cfg.fail("WithSweepInterval: interval must be ≥ 0, got %v", d)
		}
		cfg.sweepEvery = d
	}
}
