package hotlimit_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestSetPolicyStaleReadingNoReadmit: a window word whose counts are 0
// still records its window, so a reading older than the state (here a
// ManualClock set back; in production a goroutine preempted between its
// clock read and its CAS) is decided in that window, never in an older
// one it already drained.
func TestSetPolicyStaleReadingNoReadmit(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.FixedWindow{Limit: 3, Window: time.Second},
		hotlimit.SlidingWindow{Limit: 3, Window: time.Second},
		hotlimit.SlidingWindow{Limit: 1_000_000, Window: time.Second}, // ring mode
	} {
		t.Run(fmt.Sprintf("%T%v", p, p), func(t *testing.T) {
			l, c := newManual(t, p)
			L := l.Limit()
			c.Set(500 * time.Millisecond)
			if d := l.AllowN("k", L); !d.Allowed {
				t.Fatalf("first AllowN(%d) denied: %+v", L, d)
			}
			c.Set(2500 * time.Millisecond) // the sliding window's p has expired too
			if err := l.SetPolicy(p); err != nil {
				t.Fatal(err)
			}
			c.Set(500 * time.Millisecond) // a stale reading
			n := int64(0)
			for l.Allow("k").Allowed {
				n++
			}
			c.Set(2500 * time.Millisecond)
			for l.Allow("k").Allowed {
				n++
			}
			if n > L {
				t.Fatalf("admitted %d after the change, at most %d fit in window 2", n, L)
			}
		})
	}
}

// laggingClock is a ManualClock whose readings are, for about half the
// calls (a fixed pseudo-random pattern), the instant before the clock's
// latest move: the reading a goroutine preempted
// between its clock read and its CAS would use. The limiter's contract
// covers such readings ("no time has passed"), so every budget holds.
type laggingClock struct {
	m    *hotlimit.ManualClock
	prev atomic.Int64 // the reading before the latest move
	n    atomic.Uint64
}

func (c *laggingClock) Now() time.Duration {
	if (c.n.Add(1)*0x9e3779b97f4a7c15)>>63 == 1 {
		return time.Duration(c.prev.Load())
	}
	return c.m.Now()
}

func (c *laggingClock) advance(d time.Duration) {
	c.prev.Store(int64(c.m.Now()))
	c.m.Advance(d)
}

// windowEdges moves a laggingClock across edges of window W, half a window
// at a time, while workers call allow(g, i) (g < workers), runs atEdge
// after each move, then calls allow(workers+j, i) for j = 0..3 itself, and
// returns what was admitted and how many windows the clock visited.
func windowEdges(t *testing.T, c *laggingClock, W time.Duration, edges, workers int, allow func(g, i int) bool, atEdge func()) (admitted int64, windows int64) {
	t.Helper()
	var total atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := int64(0)
			for i := 0; !stop.Load(); i++ {
				if allow(g, i) {
					n++
				}
			}
			total.Add(n)
		}()
	}
	// The test goroutine works too, a few calls after each move, so every
	// half window sees decisions however the workers are scheduled.
	start := c.m.Now() / W
	mine := int64(0)
	for i := range 2 * edges {
		c.advance(W/2 + time.Duration(i%2)*(W-2*(W/2)))
		atEdge()
		for j := range 4 {
			if allow(workers+j, i) {
				mine++
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	return total.Load() + mine, int64(c.m.Now()/W - start + 1)
}

// TestSetPolicyAtWindowEdgesUnderLoad: SetPolicy converts every word at
// the instant it runs; a decision that read the clock before an edge and
// meets a converted word after it must not land in the drained window
// before the edge. Budget: at most Limit per fixed window visited.
func TestSetPolicyAtWindowEdgesUnderLoad(t *testing.T) {
	const L, W = 3, time.Second
	p := hotlimit.FixedWindow{Limit: L, Window: W}
	c := &laggingClock{m: hotlimit.NewManualClock()}
	l := limiterMaker(t, c, hotlimit.WithShards(1))(p)
	got, windows := windowEdges(t, c, W, 3000, 4,
		func(int, int) bool { return l.Allow("k").Allowed },
		func() {
			if err := l.SetPolicy(p); err != nil {
				t.Error(err)
			}
		})
	if got > L*windows {
		t.Fatalf("admitted %d over %d windows of %d: %d too many", got, windows, L, got-L*windows)
	}
}

// TestAllowLayersRefundsAtWindowEdgesUnderLoad: a layered request refused
// by its second layer gives back the first layer's admission, leaving the
// window's count at 0; a decision that read the clock before the edge
// must still not land in the drained window before it. Budget: what the
// first layer kept (plain Allow admissions plus layered admissions) is at
// most Limit per window visited.
func TestAllowLayersRefundsAtWindowEdgesUnderLoad(t *testing.T) {
	const L, W = 3, time.Second
	c := &laggingClock{m: hotlimit.NewManualClock()}
	mk := limiterMaker(t, c, hotlimit.WithShards(1))
	fw := mk(hotlimit.FixedWindow{Limit: L, Window: W})
	gate := mk(hotlimit.FixedWindow{Limit: 1, Window: 1000 * W}) // admits once, then refuses
	const workers = 4
	got, windows := windowEdges(t, c, W, 10000, workers,
		func(g, i int) bool {
			// Workers alternate; the test goroutine's first call after each
			// move is layered, the next three plain.
			if g > workers || g < workers && g%2 == 0 {
				return fw.Allow("k").Allowed
			}
			return hotlimit.AllowLayers(
				hotlimit.Layer{Limiter: fw, Key: "k", Cost: 1},
				hotlimit.Layer{Limiter: gate, Key: "g", Cost: 1},
			).Allowed
		},
		func() {})
	if got > L*windows {
		t.Fatalf("the first layer kept %d over %d windows of %d: %d too many", got, windows, L, got-L*windows)
	}
}

// scriptClock returns its readings in order, then the last one forever.
type scriptClock struct {
	mu sync.Mutex
	at []time.Duration
}

func (c *scriptClock) Now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.at[0]
	if len(c.at) > 1 {
		c.at = c.at[1:]
	}
	return t
}

func (c *scriptClock) then(at ...time.Duration) {
	c.mu.Lock()
	c.at = append(c.at[:0], at...)
	c.mu.Unlock()
}

// TestAllowLayersRefundStaleReading: a layered admission at 1.5 s given
// back on a reading of 0.5 s (the refund read the clock after a goroutine
// that read it earlier; here scripted) leaves window 1 with a count of 0.
// Neither that word nor the removal of its entry may let a 0.5 s reading
// into window 0, which is full.
func TestAllowLayersRefundStaleReading(t *testing.T) {
	const ms = time.Millisecond
	for _, p := range []hotlimit.Policy{
		hotlimit.FixedWindow{Limit: 3, Window: time.Second},
		hotlimit.SlidingWindow{Limit: 3, Window: time.Second},
	} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) {
			c := &scriptClock{at: []time.Duration{500 * ms}}
			fw := limiterMaker(t, c, hotlimit.WithShards(1))(p)
			gate := limiterMaker(t, hotlimit.NewManualClock())(hotlimit.FixedWindow{Limit: 1, Window: time.Hour})
			gate.Allow("g") // drained: the second layer refuses
			for range 3 {
				if !fw.Allow("k").Allowed {
					t.Fatal("window 0 refused its first 3")
				}
			}
			// fw admits at 1.5 s; the refund reads 0.5 s.
			c.then(1500*ms, 500*ms)
			if d := hotlimit.AllowLayers(hotlimit.Layer{Limiter: fw, Key: "k", Cost: 1}, hotlimit.Layer{Limiter: gate, Key: "g", Cost: 1}); d.Allowed {
				t.Fatal("the second layer admitted")
			}
			// Window 0 is full and window 1 empty: at most 3 more in all.
			n := 0
			for _, at := range []time.Duration{500 * ms, 1500 * ms} {
				c.then(at)
				for fw.Allow("k").Allowed {
					n++
				}
			}
			if n > 3 {
				t.Fatalf("%d admitted after window 0 filled, at most 3 fit in window 1: a 0.5 s reading went into window 0", n)
			}
		})
	}
}

// TestRingModeNewKey: in ring mode (SlidingWindow{1,000,000, 1s} keeps 23
// index bits) a new key's word records the window it was created in, so a
// key first seen at an instant whose index lies in the upper half of the
// ring is decided in that window, not in a later one that index 0 would
// seem to be after.
func TestRingModeNewKey(t *testing.T) {
	l, c := newManual(t, hotlimit.SlidingWindow{Limit: 1_000_000, Window: time.Second})
	c.Set((1<<22+1)*time.Second + 500*time.Millisecond)
	d := l.Allow("k")
	if !d.Allowed || d.ResetAfter != 1500*time.Millisecond || d.Remaining != 999_999 {
		t.Fatalf("first Allow = %+v, want admitted, Remaining 999999, ResetAfter 1.5s", d)
	}
	c.Advance(2 * time.Second)
	if d := l.AllowN("k", 0); d.Remaining != 1_000_000 || d.ResetAfter != 0 {
		t.Fatalf("two windows later = %+v, want fresh", d)
	}
}
