package hotlimit_test

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// subject is what the shared tests drive: the real limiter or the
// reference model, both on a ManualClock.
type subject interface {
	AllowN(key string, cost int64) hotlimit.Decision
}

type maker struct {
	name string
	make func(t testing.TB, policy hotlimit.Policy, c hotlimit.Clock) subject
}

// makers are the implementations every shared test runs over.
var makers = []maker{
	{"fast", func(t testing.TB, policy hotlimit.Policy, c hotlimit.Clock) subject {
		return newLimiter(t, policy, hotlimit.WithClock(c), hotlimit.WithShards(4))
	}},
	{"reference", func(t testing.TB, policy hotlimit.Policy, c hotlimit.Clock) subject {
		return refmodel.New(policy, c)
	}},
}

type step struct {
	at   time.Duration
	key  string // "" means "k"
	cost int64
	want hotlimit.Decision
}

const never = hotlimit.Never

func runSteps(t *testing.T, policy hotlimit.Policy, steps []step) {
	t.Helper()
	for _, m := range makers {
		t.Run(m.name, func(t *testing.T) {
			c := hotlimit.NewManualClock()
			s := m.make(t, policy, c)
			for i, st := range steps {
				c.Set(st.at)
				key := st.key
				if key == "" {
					key = "k"
				}
				if got := s.AllowN(key, st.cost); got != st.want {
					t.Fatalf("step %d (at %v, cost %d):\n got %+v\nwant %+v", i, st.at, st.cost, got, st.want)
				}
			}
		})
	}
}

type D = hotlimit.Decision

func TestTokenBucketWorkedExample(t *testing.T) {
	// PerSecond(3), Burst 1: after one request, RetryAfter = 333,333,334 ns.
	const T = 333_333_334
	runSteps(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 1}, []step{
		{0, "", 1, D{Allowed: true, Limit: 1, Remaining: 0, ResetAfter: T}},
		{0, "", 1, D{Limit: 1, RetryAfter: T, ResetAfter: T}},
		{T - 1, "", 1, D{Limit: 1, RetryAfter: 1, ResetAfter: 1}},
		{T, "", 1, D{Allowed: true, Limit: 1, ResetAfter: T}},
	})
}

func TestTokenBucketSteps(t *testing.T) {
	const T = 100 * time.Millisecond
	runSteps(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 5}, []step{
		{0, "", 3, D{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 3 * T}},
		{0, "", 3, D{Limit: 5, Remaining: 2, RetryAfter: T, ResetAfter: 3 * T}},
		{T, "", 3, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: 5 * T}},
		{T, "", 0, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: 5 * T}},
		{T, "", 6, D{Limit: 5, RetryAfter: never, ResetAfter: 5 * T}},
		{T, "", -1, D{Limit: 5, RetryAfter: never, ResetAfter: 5 * T}},
		{T + 1, "", 1, D{Limit: 5, RetryAfter: T - 1, ResetAfter: 5*T - 1}},
		{2 * T, "", 1, D{Allowed: true, Limit: 5, ResetAfter: 5 * T}},
		{10 * T, "", 1, D{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: T}},
		{10 * T, "other", 0, D{Allowed: true, Limit: 5, Remaining: 5}},
		{10 * T, "other", 5, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: 5 * T}},
		// Clock set back: no time has passed, nothing extra is admitted.
		{5 * T, "other", 1, D{Limit: 5, Remaining: 0, RetryAfter: 6 * T, ResetAfter: 10 * T}},
	})
}

func TestLeakyBucketSteps(t *testing.T) {
	const T = 100 * time.Millisecond
	runSteps(t, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 2}, []step{
		{0, "", 1, D{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: T}},
		{0, "", 1, D{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 2 * T, Delay: T}},
		{0, "", 1, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * T, Delay: 2 * T}},
		{0, "", 1, D{Limit: 3, RetryAfter: T, ResetAfter: 3 * T}},
		{T / 2, "", 1, D{Limit: 3, RetryAfter: T / 2, ResetAfter: 5 * T / 2}},
		{T / 2, "", 0, D{Allowed: true, Limit: 3, ResetAfter: 5 * T / 2}},
		{T, "", 1, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * T, Delay: 2 * T}},
		{10 * T, "", 3, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * T}},
		{10 * T, "", 4, D{Limit: 3, RetryAfter: never, ResetAfter: 3 * T}},
		{20 * T, "", 2, D{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 2 * T}},
	})
	// Capacity 0: no queue.
	runSteps(t, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 0}, []step{
		{0, "", 1, D{Allowed: true, Limit: 1, ResetAfter: T}},
		{0, "", 1, D{Limit: 1, RetryAfter: T, ResetAfter: T}},
		{T, "", 1, D{Allowed: true, Limit: 1, ResetAfter: T}},
	})
}

func TestFixedWindowSteps(t *testing.T) {
	const W = time.Second
	runSteps(t, hotlimit.FixedWindow{Limit: 3, Window: W}, []step{
		{W / 2, "", 0, D{Allowed: true, Limit: 3, Remaining: 3}},
		{W / 2, "", 2, D{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: W / 2}},
		{9 * W / 10, "", 2, D{Limit: 3, Remaining: 1, RetryAfter: W / 10, ResetAfter: W / 10}},
		{9 * W / 10, "", 1, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: W / 10}},
		{W - 1, "", 1, D{Limit: 3, RetryAfter: 1, ResetAfter: 1}},
		{W, "", 3, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: W}},
		{W, "", 0, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: W}},
		{W, "", 4, D{Limit: 3, Remaining: 0, RetryAfter: never, ResetAfter: W}},
		{3*W + W/5, "", 0, D{Allowed: true, Limit: 3, Remaining: 3}},
		{3*W + W/5, "", 1, D{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: 4 * W / 5}},
		// Clock set back two windows: read at the start of the stored window.
		{W + W/5, "", 1, D{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: W}},
		{W + W/5, "", 2, D{Limit: 3, Remaining: 1, RetryAfter: W, ResetAfter: W}},
	})
}

func TestSlidingWindowSteps(t *testing.T) {
	const W = time.Second
	const ms = time.Millisecond
	runSteps(t, hotlimit.SlidingWindow{Limit: 10, Window: W}, []step{
		{0, "", 10, D{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 2 * W}},
		{1500 * ms, "", 0, D{Allowed: true, Limit: 10, Remaining: 5, ResetAfter: 500 * ms}},
		{1500 * ms, "", 5, D{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 1500 * ms}},
		// Fits later in this window, when p's weight has decayed.
		{1500 * ms, "", 1, D{Limit: 10, RetryAfter: 100 * ms, ResetAfter: 1500 * ms}},
		{1600*ms - 1, "", 1, D{Limit: 10, RetryAfter: 1, ResetAfter: 1400*ms + 1}},
		// Fits only in the next window, when q has become p.
		{1500 * ms, "", 6, D{Limit: 10, RetryAfter: 700 * ms, ResetAfter: 1500 * ms}},
		// Fits only in the window after next.
		{1500 * ms, "", 10, D{Limit: 10, RetryAfter: 1500 * ms, ResetAfter: 1500 * ms}},
		{1500 * ms, "", 11, D{Limit: 10, RetryAfter: never, ResetAfter: 1500 * ms}},
		{1600 * ms, "", 1, D{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 1400 * ms}},
		// p = 6 weighs ⌈6·0.8⌉ = 5; 6 more fit once 6·(W−e) ≤ 4·W: e = 333,333,334 ns.
		{2200 * ms, "", 6, D{Limit: 10, Remaining: 5, RetryAfter: 133_333_334, ResetAfter: 800 * ms}},
		{2400 * ms, "", 6, D{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 1600 * ms}},
		{10 * W, "", 0, D{Allowed: true, Limit: 10, Remaining: 10}},
	})
}

func TestSlidingWindowDayMillion(t *testing.T) {
	// 24 h windows with a limit of 1,000,000: products reach 8.6e19, past int64.
	const W = 24 * time.Hour
	runSteps(t, hotlimit.SlidingWindow{Limit: 1_000_000, Window: W}, []step{
		{0, "", 1_000_000, D{Allowed: true, Limit: 1_000_000, ResetAfter: 2 * W}},
		{W + W/2, "", 0, D{Allowed: true, Limit: 1_000_000, Remaining: 500_000, ResetAfter: W / 2}},
		{W + W/2, "", 500_000, D{Allowed: true, Limit: 1_000_000, ResetAfter: W + W/2}},
		// room 0 with p = 1e6: one more unit needs p's weight to drop by 1:
		// 1e6·(W−e') ≤ 999,999·W ... done by the reference's search too.
		{W + W/2, "", 1, D{Limit: 1_000_000, RetryAfter: W / 1_000_000, ResetAfter: W + W/2}},
		{W + W/2 + W/1_000_000, "", 1, D{Allowed: true, Limit: 1_000_000, ResetAfter: W + W/2 - W/1_000_000}},
	})
}

func TestSlidingLogSteps(t *testing.T) {
	// 5 login attempts per 15 minutes: at most 5 in any 15-minute interval.
	const W = 15 * time.Minute
	const m = time.Minute
	runSteps(t, hotlimit.SlidingLog{Limit: 5, Window: W}, []step{
		{0, "", 0, D{Allowed: true, Limit: 5, Remaining: 5}},
		{0, "", 2, D{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: W}},
		{5 * m, "", 3, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: W}},
		{5 * m, "", 0, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: W}},
		// One unit frees when the first two stop counting, at 15m.
		{10 * m, "", 1, D{Limit: 5, RetryAfter: 5 * m, ResetAfter: 10 * m}},
		// Three units need one of the 5m instants to go too, at 20m.
		{10 * m, "", 3, D{Limit: 5, RetryAfter: 10 * m, ResetAfter: 10 * m}},
		{10 * m, "", 6, D{Limit: 5, RetryAfter: never, ResetAfter: 10 * m}},
		{15*m - 1, "", 1, D{Limit: 5, RetryAfter: 1, ResetAfter: 5*m + 1}},
		{15 * m, "", 0, D{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 5 * m}},
		{15 * m, "", 2, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: W}},
		// Clock set back: decided at the latest instant written, 15m.
		{14 * m, "", 1, D{Limit: 5, RetryAfter: 5 * m, ResetAfter: W}},
		// The fixed window's boundary burst cannot happen: 5 at 29m59s
		// would make 7 in [15m, 30m).
		{30*m - time.Second, "", 0, D{Allowed: true, Limit: 5, Remaining: 3, ResetAfter: time.Second}},
		{30 * m, "", 5, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: W}},
		{45 * m, "", 0, D{Allowed: true, Limit: 5, Remaining: 5}},
	})
}
