package hotlimit_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// setStep is a policy change or a decision at an instant.
type setStep struct {
	at     time.Duration
	policy hotlimit.Policy // non-nil: SetPolicy(policy) instead of a decision
	cost   int64
	want   D
}

func runSetSteps(t *testing.T, initial hotlimit.Policy, steps []setStep) {
	t.Helper()
	c := hotlimit.NewManualClock()
	l, err := hotlimit.New(initial, hotlimit.WithClock(c), hotlimit.WithSweepInterval(0), hotlimit.WithShards(4))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i, st := range steps {
		c.Set(st.at)
		if st.policy != nil {
			if err := l.SetPolicy(st.policy); err != nil {
				t.Fatalf("step %d: SetPolicy(%+v): %v", i, st.policy, err)
			}
			if l.Policy() != st.policy {
				t.Fatalf("step %d: Policy() = %+v", i, l.Policy())
			}
			continue
		}
		if got := l.AllowN("k", st.cost); got != st.want {
			t.Fatalf("step %d (at %v, cost %d):\n got %+v\nwant %+v", i, st.at, st.cost, got, st.want)
		}
	}
}

// TestSetPolicyHalveDouble halves and doubles each policy mid-stream and
// checks the carry-over rules documented on SetPolicy.
func TestSetPolicyHalveDouble(t *testing.T) {
	const ms = time.Millisecond
	t.Run("TokenBucket", func(t *testing.T) {
		// Debt is kept as time: 600 ms of a 1 s bucket.
		runSetSteps(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 10}, []setStep{
			{0, nil, 6, D{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 600 * ms}},
			{0, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(5), Burst: 5}, 0, D{}},
			{0, nil, 0, D{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 600 * ms}},
			{0, nil, 3, D{Limit: 5, Remaining: 2, RetryAfter: 200 * ms, ResetAfter: 600 * ms}},
			{0, nil, 2, D{Allowed: true, Limit: 5, Remaining: 0, ResetAfter: time.Second}},
			{0, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(20), Burst: 20}, 0, D{}},
			{0, nil, 1, D{Limit: 20, RetryAfter: 50 * ms, ResetAfter: time.Second}},
			{500 * ms, nil, 0, D{Allowed: true, Limit: 20, Remaining: 10, ResetAfter: 500 * ms}},
			// The burst shrinks below the debt: wait out the excess.
			{500 * ms, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(20), Burst: 4}, 0, D{}},
			{500 * ms, nil, 1, D{Limit: 4, RetryAfter: 350 * ms, ResetAfter: 500 * ms}},
			{850 * ms, nil, 1, D{Allowed: true, Limit: 4, Remaining: 0, ResetAfter: 200 * ms}},
		})
	})
	t.Run("LeakyBucket", func(t *testing.T) {
		runSetSteps(t, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 9}, []setStep{
			{0, nil, 4, D{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: 400 * ms}},
			{0, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(5), Capacity: 4}, 0, D{}},
			// Debt 400 ms of an 800 ms queue at 200 ms per request.
			{0, nil, 1, D{Allowed: true, Limit: 5, Remaining: 2, ResetAfter: 600 * ms, Delay: 400 * ms}},
			{0, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(20), Capacity: 19}, 0, D{}},
			{0, nil, 0, D{Allowed: true, Limit: 20, Remaining: 8, ResetAfter: 600 * ms}},
		})
	})
	t.Run("FixedWindow", func(t *testing.T) {
		const W = time.Minute
		runSetSteps(t, hotlimit.FixedWindow{Limit: 10, Window: W}, []setStep{
			{10 * time.Second, nil, 6, D{Allowed: true, Limit: 10, Remaining: 4, ResetAfter: 50 * time.Second}},
			{10 * time.Second, hotlimit.FixedWindow{Limit: 5, Window: W}, 0, D{}},
			// 6 counted against 5: denied until the window turns.
			{20 * time.Second, nil, 1, D{Limit: 5, RetryAfter: 40 * time.Second, ResetAfter: 40 * time.Second}},
			{20 * time.Second, hotlimit.FixedWindow{Limit: 20, Window: W}, 0, D{}},
			// Still 6 counted: 14 left, not 20.
			{30 * time.Second, nil, 0, D{Allowed: true, Limit: 20, Remaining: 14, ResetAfter: 30 * time.Second}},
			{30 * time.Second, nil, 14, D{Allowed: true, Limit: 20, Remaining: 0, ResetAfter: 30 * time.Second}},
			{W, nil, 0, D{Allowed: true, Limit: 20, Remaining: 20}},
		})
	})
	t.Run("FixedWindow/newWindow", func(t *testing.T) {
		// The count moves into the new window holding the change instant.
		runSetSteps(t, hotlimit.FixedWindow{Limit: 10, Window: time.Minute}, []setStep{
			{70 * time.Second, nil, 7, D{Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 50 * time.Second}},
			{70 * time.Second, hotlimit.FixedWindow{Limit: 10, Window: 30 * time.Second}, 0, D{}},
			{75 * time.Second, nil, 0, D{Allowed: true, Limit: 10, Remaining: 3, ResetAfter: 15 * time.Second}},
			{90 * time.Second, nil, 0, D{Allowed: true, Limit: 10, Remaining: 10}},
		})
	})
	t.Run("SlidingWindow", func(t *testing.T) {
		const W = time.Second
		runSetSteps(t, hotlimit.SlidingWindow{Limit: 10, Window: W}, []setStep{
			{0, nil, 8, D{Allowed: true, Limit: 10, Remaining: 2, ResetAfter: 2 * W}},
			{1500 * ms, nil, 0, D{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: 500 * ms}},
			{1500 * ms, hotlimit.SlidingWindow{Limit: 5, Window: W}, 0, D{}},
			// p = 8 weighs 4 at e = 500 ms: 1 left of 5.
			{1500 * ms, nil, 0, D{Allowed: true, Limit: 5, Remaining: 1, ResetAfter: 500 * ms}},
			{1500 * ms, hotlimit.SlidingWindow{Limit: 20, Window: W}, 0, D{}},
			{1500 * ms, nil, 0, D{Allowed: true, Limit: 20, Remaining: 16, ResetAfter: 500 * ms}},
		})
	})
	t.Run("SlidingLog", func(t *testing.T) {
		const m = time.Minute
		runSetSteps(t, hotlimit.SlidingLog{Limit: 6, Window: 15 * m}, []setStep{
			{0, nil, 2, D{Allowed: true, Limit: 6, Remaining: 4, ResetAfter: 15 * m}},
			{5 * m, nil, 3, D{Allowed: true, Limit: 6, Remaining: 1, ResetAfter: 15 * m}},
			{5 * m, hotlimit.SlidingLog{Limit: 3, Window: 15 * m}, 0, D{}},
			// 5 instants against 3: two must expire first (the 0m pair, at 15m),
			// then one more for a unit (a 5m one, at 20m).
			{6 * m, nil, 1, D{Limit: 3, RetryAfter: 14 * m, ResetAfter: 14 * m}},
			{15 * m, nil, 0, D{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 5 * m}},
			{15 * m, hotlimit.SlidingLog{Limit: 12, Window: 15 * m}, 0, D{}},
			{15 * m, nil, 9, D{Allowed: true, Limit: 12, Remaining: 0, ResetAfter: 15 * m}},
			{15 * m, hotlimit.SlidingLog{Limit: 12, Window: 5 * m}, 0, D{}},
			// The shorter window: the 5m instants no longer count at 15m.
			{15 * m, nil, 0, D{Allowed: true, Limit: 12, Remaining: 3, ResetAfter: 5 * m}},
		})
	})
}

func TestSetPolicyRejects(t *testing.T) {
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, tc := range []struct {
		policy hotlimit.Policy
		want   string
	}{
		{hotlimit.FixedWindow{Limit: 1, Window: time.Second}, "a TokenBucket limiter cannot take a FixedWindow policy"},
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 0}, "TokenBucket.Burst must be > 0"},
		{nil, "nil Policy"},
		{(*hotlimit.TokenBucket)(nil), "nil *TokenBucket"},
	} {
		if err := l.SetPolicy(tc.policy); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetPolicy(%+v) = %v, want %q", tc.policy, err, tc.want)
		}
	}
	if l.Limit() != 1 {
		t.Fatalf("a rejected SetPolicy changed the limit to %d", l.Limit())
	}
}

// TestSetPolicyUnderLoad flips the policy between two limits while 16
// goroutines hammer one key on a frozen clock: counts carry over, so the
// key never admits more than the larger policy allows.
func TestSetPolicyUnderLoad(t *testing.T) {
	for _, pair := range [][2]hotlimit.Policy{
		{hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 100}, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 60}},
		{hotlimit.FixedWindow{Limit: 100, Window: time.Hour}, hotlimit.FixedWindow{Limit: 60, Window: time.Hour}},
		{hotlimit.SlidingWindow{Limit: 100, Window: time.Hour}, hotlimit.SlidingWindow{Limit: 60, Window: time.Hour}},
		{hotlimit.SlidingLog{Limit: 100, Window: time.Hour}, hotlimit.SlidingLog{Limit: 60, Window: time.Hour}},
	} {
		c := hotlimit.NewManualClock()
		c.Set(time.Hour)
		l, err := hotlimit.New(pair[0], hotlimit.WithClock(c), hotlimit.WithSweepInterval(0), hotlimit.WithShards(2))
		if err != nil {
			t.Fatal(err)
		}
		var admitted atomic.Int64
		stop := make(chan struct{})
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.SetPolicy(pair[i%2]); err != nil {
					t.Error(err)
				}
			}
		}()
		inParallel(16, func(g int) {
			for i := range 500 {
				key := "hot"
				if i%3 == 0 {
					key = string(rune('a'+g)) + "-cold" // inserts, so conversions race rebuilds
				}
				if l.Allow(key).Allowed && key == "hot" {
					admitted.Add(1)
				}
			}
		})
		close(stop)
		if n := admitted.Load(); n > 100 || n < 60 {
			t.Errorf("%T: admitted %d on the hot key, want 60..100", pair[0], n)
		}
		l.Close()
	}
}

func TestConcurrencySetLimit(t *testing.T) {
	c := newConc(t, 4)
	var ps []hotlimit.Permit
	for range 4 {
		p, _ := c.TryAcquire("k")
		ps = append(ps, p)
	}
	if err := c.SetLimit(2); err != nil {
		t.Fatal(err)
	}
	ps[0].Release()
	ps[1].Release()
	if _, ok := c.TryAcquire("k"); ok {
		t.Fatal("admitted with 2 in flight under a limit of 2")
	}
	ps[2].Release()
	p, ok := c.TryAcquire("k")
	if !ok || c.InFlight("k") != 2 {
		t.Fatalf("ok %v, InFlight %d", ok, c.InFlight("k"))
	}
	if err := c.SetLimit(0); err == nil {
		t.Fatal("SetLimit(0) accepted")
	}
	p.Release()
	ps[3].Release()
}
