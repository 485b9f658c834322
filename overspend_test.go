package hotlimit_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// hammer runs g goroutines that each call AllowN(key, 1) n times and
// returns how many were admitted.
func hammer(s subject, key string, g, n int) int64 {
	var admitted atomic.Int64
	inParallel(g, func(int) {
		for range n {
			if s.AllowN(key, 1).Allowed {
				admitted.Add(1)
			}
		}
	})
	return admitted.Load()
}

// TestConcurrentExactCount: 64 goroutines on one key with the clock frozen
// admit exactly the capacity, for every algorithm; after the clock moves by
// k intervals, exactly k more.
func TestConcurrentExactCount(t *testing.T) {
	const k = 7
	cases := []struct {
		policy   hotlimit.Policy
		capacity int64
		interval time.Duration // time that frees exactly one unit
	}{
		{hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 100}, 100, 100 * time.Millisecond},
		{hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 99}, 100, 100 * time.Millisecond},
		// Windows free a whole window at once: advance k windows, k·Limit more.
		{hotlimit.FixedWindow{Limit: 100, Window: time.Second}, 100, 0},
		{hotlimit.SlidingWindow{Limit: 100, Window: time.Second}, 100, 0},
		{hotlimit.SlidingLog{Limit: 100, Window: time.Second}, 100, 0},
	}
	for _, tc := range cases {
		for _, m := range makers {
			t.Run(fmt.Sprintf("%T/%s", tc.policy, m.name), func(t *testing.T) {
				c := hotlimit.NewManualClock()
				c.Set(time.Hour)
				s := m.make(t, tc.policy, c)
				if got := hammer(s, "hot", 64, 50); got != tc.capacity {
					t.Fatalf("frozen clock: admitted %d, want %d", got, tc.capacity)
				}
				var want int64
				if tc.interval > 0 {
					c.Advance(k * tc.interval)
					want = k
				} else {
					c.Advance(2 * time.Second) // sliding: the previous window must expire too
					want = tc.capacity
				}
				if got := hammer(s, "hot", 64, 50); got != want {
					t.Fatalf("after advancing: admitted %d, want %d", got, want)
				}
			})
		}
	}
}

// TestConcurrentManyKeys: goroutines spread over many keys that are being
// inserted concurrently; each key admits exactly its burst.
func TestConcurrentManyKeys(t *testing.T) {
	c := hotlimit.NewManualClock()
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 3},
		hotlimit.WithClock(c), hotlimit.WithSweepInterval(0), hotlimit.WithShards(2))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const keys, g = 2000, 8
	var counts [keys]atomic.Int64
	inParallel(g, func(i int) {
		for j := range keys * 5 {
			k := (j*7 + i*13) % keys
			if l.Allow(fmt.Sprintf("user:%06d", k)).Allowed {
				counts[k].Add(1)
			}
		}
	})
	for k := range counts {
		if got := counts[k].Load(); got != 3 {
			t.Fatalf("key %d admitted %d, want 3", k, got)
		}
	}
	if l.Len() != keys {
		t.Fatalf("Len() = %d, want %d", l.Len(), keys)
	}
}
