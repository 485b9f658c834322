package hotlimit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// A Clock reports monotonic time as a duration since a fixed origin.
//
// Readings from one Clock must never decrease; a limiter treats a reading
// older than what a key's state already reflects as "no time has passed",
// so a clock that does go backwards can only cause denials, never extra
// admissions. One exception: a bucket give-back (Admission.Refund, a
// refused layer of AllowLayers, a cancelled Wait) that lands below later
// admissions must know that none of them was decided later than its
// reading, or it may give back units that refilled before that decision.
// The limiter gets that from the order of its reads with a clock that
// never goes back, and from the latest reading Now has returned with a
// ManualClock; a Clock of your own that goes backwards can make such a
// give-back return too much.
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Duration
}

// processStart is read once: the wall-clock instant that anchors the
// default clock, and the monotonic reading that advances it.
var (
	processStart     = time.Now()
	processStartUnix = time.Duration(processStart.UnixNano())
)

// systemNow is the default clock: Unix time read once at process start,
// advanced only by the monotonic clock. Fixed windows therefore fall on
// wall-clock boundaries (a one-minute window is 12:00:00–12:00:59), and a
// wall-clock step (NTP, an operator) never moves it.
func systemNow() time.Duration {
	return processStartUnix + time.Since(processStart)
}

// SystemClock is the default Clock. See systemNow for its definition.
type SystemClock struct{}

// Now returns Unix time in nanoseconds, advanced by the monotonic clock.
func (SystemClock) Now() time.Duration { return systemNow() }

// ManualClock is a Clock that moves only when told to. It starts at 0.
// It is meant for tests and simulations: drive a limiter through exact
// instants without sleeping. It is safe for concurrent use.
//
// It may be set back. A limiter then judges every call at the reading the
// clock is back at (docs/semantics.md, "Time" and "Giving back"): a
// give-back on top of a key's admissions leaves it where its other
// admissions put it, one below later admissions gives back as at the
// latest reading Now has returned (no unit that refilled before a later
// decision comes back), a key with no entry is decided as owing what the
// keys removed as fresh may still owe there, and Check reports what the
// key then admits.
type ManualClock struct {
	now  atomic.Int64
	high atomic.Int64 // the latest reading Now has returned: see latest
}

// NewManualClock returns a ManualClock that reads 0.
func NewManualClock() *ManualClock { return &ManualClock{} }

// Now returns the clock's current reading.
func (c *ManualClock) Now() time.Duration {
	t := c.now.Load()
	c.raise(t) // before the reading is returned: see latest
	return time.Duration(t)
}

// Advance moves the clock forward by d and returns the new reading. The
// reading saturates at the limits of time.Duration instead of wrapping. A
// negative d moves it backwards: a key's state newer than the reading is
// then read as docs/semantics.md's "Stale readings" says (never admitting
// more), and give-backs, Sweep and Check are judged at the reading (see
// ManualClock).
func (c *ManualClock) Advance(d time.Duration) time.Duration {
	for {
		old := c.now.Load()
		next := old + int64(d)
		if d > 0 && next < old {
			next = math.MaxInt64
		} else if d < 0 && next > old {
			next = math.MinInt64
		}
		if c.now.CompareAndSwap(old, next) {
			return time.Duration(next)
		}
	}
}

// Set sets the clock's reading to t.
func (c *ManualClock) Set(t time.Duration) { c.now.Store(int64(t)) }

// raise makes the latest reading at least t.
func (c *ManualClock) raise(t int64) {
	for {
		old := c.high.Load()
		if t <= old || c.high.CompareAndSwap(old, t) {
			return
		}
	}
}

// latest returns the latest reading Now has returned, even after the
// clock was set back: Now raises it before it returns a reading, so a
// decision that read the clock before its CAS, and a give-back that loads
// the word after that CAS and then latest, see latest no older than that
// decision's reading. A reading the clock held that nobody read (set
// forward and back again) does not count: no decision was made at it. A
// give-back reads it (see Limiter.giveBackNow).
func (c *ManualClock) latest() int64 { return c.high.Load() }

// CoarseClock is a Clock that returns a cached reading of the default
// clock, refreshed by one goroutine every resolution. Reading it is a
// single atomic load, which makes a decision cheaper by the cost of a
// clock read (45 to 56 ns on the 2-vCPU machine that the bench module's
// RESULTS.md reports, https://github.com/hotlimit/hotlimit/blob/main/bench/RESULTS.md).
//
// The cached reading lags real time by up to the resolution, and by more
// when the refreshing goroutine is not scheduled (a busy machine can delay
// it by tens of milliseconds). Call the lag L. What it trades:
//
//   - Every decision is exact for the reading it is made at, and a Limiter
//     that uses a CoarseClock re-reads the precise clock before it denies
//     a request, so a denial and its RetryAfter are computed from the
//     precise time. While the cache lags, it errs towards denying: less
//     time seems to have passed, so less has been replenished.
//   - Measured on real time, an admission is booked as if the request had
//     come up to L earlier. When the cache catches up, what it held back is
//     available at once, so a token or leaky bucket can admit up to ⌈L/T⌉
//     units more over an interval than the policy allows
//     (Burst + ⌊(b−a+L)/T⌋ over [a, b] instead of Burst + ⌊(b−a)/T⌋;
//     TestLaggingClockBound checks exactly this bound), and a request made
//     in the first L of a window can count against the window before it.
//
// Use it where that much imprecision is acceptable: at 100 requests per
// second (T = 10 ms) and a lag of 1 ms, it is at most one request more over
// any interval.
//
// Create it with NewCoarseClock and stop it with Stop, or let a Limiter own
// one with WithCoarseClock.
type CoarseClock struct {
	now  atomic.Int64
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

// NewCoarseClock starts a CoarseClock refreshed every resolution.
// A resolution below 10µs is raised to 10µs.
func NewCoarseClock(resolution time.Duration) *CoarseClock {
	if resolution < 10*time.Microsecond {
		resolution = 10 * time.Microsecond
	}
	c := &CoarseClock{stop: make(chan struct{}), done: make(chan struct{})}
	c.now.Store(int64(systemNow()))
	go c.run(resolution)
	return c
}

func (c *CoarseClock) run(resolution time.Duration) {
	defer close(c.done)
	t := time.NewTicker(resolution)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.refresh()
		}
	}
}

// refresh stores the precise reading, never moving the cache backwards.
func (c *CoarseClock) refresh() time.Duration {
	p := int64(systemNow())
	for {
		old := c.now.Load()
		if p <= old {
			return time.Duration(old)
		}
		if c.now.CompareAndSwap(old, p) {
			return time.Duration(p)
		}
	}
}

// Now returns the cached reading.
func (c *CoarseClock) Now() time.Duration { return time.Duration(c.now.Load()) }

// Precise reads the default clock and refreshes the cache with it.
func (c *CoarseClock) Precise() time.Duration { return c.refresh() }

// Stop stops the refreshing goroutine and waits for it to exit. The clock
// keeps returning its last reading. Stop is idempotent.
func (c *CoarseClock) Stop() {
	c.once.Do(func() { close(c.stop) })
	<-c.done
}
