package hotlimit_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
)

// resetPolicies are one policy of each kind, each with a Limit of 3.
var resetPolicies = map[string]hotlimit.Policy{
	"TokenBucket":   hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 3},
	"LeakyBucket":   hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: 2},
	"FixedWindow":   hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
	"SlidingWindow": hotlimit.SlidingWindow{Limit: 3, Window: time.Minute},
	"SlidingLog":    hotlimit.SlidingLog{Limit: 3, Window: time.Minute},
}

// TestReset drains a key of each policy (and, for the windows, leaves
// counts in the previous window too), resets it, and checks that every
// decision after the reset is the decision a new limiter makes for a new
// key at the same instants; that Len and Stats.Keys drop by one while
// Allowed, Denied, Swept and Evicted keep their values; and that another
// key is untouched.
func TestReset(t *testing.T) {
	for name, p := range resetPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			c.Set(1000*time.Second + 123*time.Millisecond)
			l.AllowN("k", 2) // in the previous window for the windows
			c.Advance(time.Minute)
			for l.Allow("k").Allowed {
			}
			l.Allow("other")
			if d := l.Allow("k"); d.Allowed {
				t.Fatalf("not drained: %+v", d)
			}
			before := l.Stats()
			l.Reset("k")
			after := l.Stats()
			if l.Len() != 1 || after.Keys != 1 {
				t.Errorf("Len %d, Keys %d after the reset; want 1 (the other key)", l.Len(), after.Keys)
			}
			if after.Allowed != before.Allowed || after.Denied != before.Denied || after.Swept != before.Swept || after.Evicted != before.Evicted {
				t.Errorf("Stats %+v after the reset, %+v before: only Keys may change", after, before)
			}
			if d := l.AllowN("other", 0); d.Remaining != 2 {
				t.Errorf("the other key changed: %+v", d)
			}
			ref, rc := newManual(t, p)
			rc.Set(c.Now())
			for i, step := range []struct {
				advance time.Duration
				cost    int64
			}{{0, 0}, {0, 1}, {0, 2}, {0, 1}, {1500 * time.Millisecond, 1}, {time.Minute, 3}} {
				c.Advance(step.advance)
				rc.Advance(step.advance)
				if got, want := l.AllowN("k", step.cost), ref.AllowN("k", step.cost); got != want {
					t.Fatalf("step %d (cost %d): %+v after the reset, %+v for a new key", i, step.cost, got, want)
				}
			}
		})
	}
}

// TestResetNoKey: resetting a key the limiter does not hold, or one
// longer than MaxKeyLen, changes nothing.
func TestResetNoKey(t *testing.T) {
	for name, p := range resetPolicies {
		l, _ := newManual(t, p)
		l.AllowN("k", 3)
		l.Reset("absent")
		l.Reset(strings.Repeat("x", hotlimit.MaxKeyLen+1))
		if d := l.AllowN("k", 0); l.Len() != 1 || d.Remaining != 0 {
			t.Errorf("%s: Len %d, Remaining %d; want 1 and 0", name, l.Len(), d.Remaining)
		}
	}
}

// TestResetStaleReading: a request that re-creates a key after a Reset is
// decided as a new key's first request at its own reading, whether that
// reading was taken before the Reset (a goroutine preempted between its
// clock read and its decision, staleClock) or the clock was set back below
// the Reset since: the Reset raises nothing, so the key is fresh there
// and admits one unit at 99 s and one at 100 s, a second apart, as a new
// key would. (Reset used to decide both at the Reset's instant, which on a
// clock set back left the key, and every key created after, owing.)
func TestResetStaleReading(t *testing.T) {
	for name, p := range map[string]hotlimit.Policy{
		"TokenBucket": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1},
		"FixedWindow": hotlimit.FixedWindow{Limit: 1, Window: time.Second},
		"SlidingLog":  hotlimit.SlidingLog{Limit: 1, Window: time.Second},
	} {
		for _, stale := range []bool{false, true} {
			c := &staleClock{}
			l := newLimiter(t, p, hotlimit.WithClock(c))
			c.Set(100 * time.Second)
			l.Allow("k")
			l.Reset("k")
			if stale {
				c.readOnce(99 * time.Second) // read before the Reset
			} else {
				c.Set(99 * time.Second) // set back
			}
			if d := l.Allow("k"); !d.Allowed {
				t.Errorf("%s (stale %v): refused at 99 s, after a Reset at 100 s: %+v", name, stale, d)
			}
			if d := l.Allow("k"); d.Allowed != stale {
				t.Errorf("%s (stale %v): a second unit at %v: %v", name, stale, c.Now(), d.Allowed)
			}
			c.Set(100 * time.Second)
			if d := l.Allow("k"); !d.Allowed && !stale {
				t.Errorf("%s: refused at 100 s, a second after the admission at 99 s: %+v", name, d)
			}
		}
	}
}

// staleClock is a ManualClock whose next read, once set with readOnce,
// returns an older reading: a goroutine that read the clock and was
// preempted before it decided.
type staleClock struct {
	hotlimit.ManualClock
	once atomic.Int64 // 0: none
}

func (c *staleClock) readOnce(t time.Duration) { c.once.Store(int64(t)) }

func (c *staleClock) Now() time.Duration {
	if t := c.once.Swap(0); t != 0 {
		return time.Duration(t)
	}
	return c.ManualClock.Now()
}

// TestResetConcurrent races Reset against AllowN on one key with the clock
// frozen, under -race: each reset gives back at most one fresh quota, so
// the admissions never exceed Limit·(resets+1), and Stats counts every
// decision exactly once. After the race, a reset key admits exactly Limit
// more.
func TestResetConcurrent(t *testing.T) {
	for name, p := range resetPolicies {
		t.Run(name, func(t *testing.T) {
			const limit, workers, perWorker, resets = 3, 4, 200, 50
			l, _ := newManual(t, p)
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range perWorker {
						if l.Allow("k").Allowed {
							admitted.Add(1)
						}
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range resets {
					l.Reset("k")
				}
			}()
			wg.Wait()
			n := admitted.Load()
			if n < limit || n > limit*(resets+1) {
				t.Fatalf("%d admitted with %d resets; want [%d, %d]", n, resets, limit, limit*(resets+1))
			}
			if st := l.Stats(); st.Allowed != uint64(n) || st.Denied != uint64(workers*perWorker)-uint64(n) || st.Keys != uint64(l.Len()) {
				t.Fatalf("Stats %+v for %d admitted of %d, Len %d", st, n, workers*perWorker, l.Len())
			}
			l.Reset("k")
			got := 0
			for range limit + 2 {
				if l.Allow("k").Allowed {
					got++
				}
			}
			if got != limit {
				t.Fatalf("%d admitted after the last reset, want %d", got, limit)
			}
		})
	}
}

// TestResetDuringLayersGivesNothingBack: an AllowLayers admitted by the
// first layer and refused by the second must not give its units back to
// the state the first layer's key gets after a Reset, or a new request
// after the reset would have its admission undone. The second layer's
// deny hook runs after that layer refused and before the first is given
// back: there it resets the key and a new request takes the fresh key's
// whole quota. With the clock frozen, one more request must then be
// denied, for every policy.
func TestResetDuringLayersGivesNothingBack(t *testing.T) {
	for name, p := range resetPolicies {
		t.Run(name, func(t *testing.T) {
			c := hotlimit.NewManualClock()
			c.Set(time.Hour)
			user := newLimiter(t, p, hotlimit.WithClock(c))
			var during hotlimit.Decision
			global := newLimiter(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, hotlimit.WithClock(c),
				hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) {
					user.Reset("u")
					during = user.AllowN("u", user.Limit())
				}))
			global.Allow("g") // drained: the layered request is refused there
			if d := hotlimit.AllowLayers(hotlimit.Layer{Limiter: user, Key: "u", Cost: 1}, hotlimit.Layer{Limiter: global, Key: "g", Cost: 1}); d.Allowed {
				t.Fatalf("AllowLayers admitted through a drained layer: %+v", d)
			}
			if !during.Allowed {
				t.Fatalf("the fresh key's whole quota after the reset was denied: %+v", during)
			}
			if d := user.Allow("u"); d.Allowed {
				t.Fatalf("admitted beyond the fresh key's quota: the refused layered request gave its unit back after the reset: %+v", d)
			}
		})
	}
}

// TestResetDuringWaitGivesNothingBack: a Wait that reserved a slot and
// sleeps, and whose context ends after a Reset of its key, must not give
// the slot back to the key's new state.
func TestResetDuringWaitGivesNothingBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 2})
		l.AllowN("k", 2)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() { errc <- l.Wait(ctx, "k", 1) }()
		synctest.Wait() // Wait has reserved its slot and sleeps
		l.Reset("k")
		if d := l.AllowN("k", 2); !d.Allowed {
			t.Fatalf("the fresh key's whole quota after the reset was denied: %+v", d)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		if d := l.Allow("k"); d.Allowed {
			t.Fatalf("admitted beyond the fresh key's quota: the cancelled Wait gave its slot back after the reset: %+v", d)
		}
	})
}
