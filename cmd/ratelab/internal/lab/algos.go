package lab

import (
	"fmt"
	"math"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Policy is the one limit that ratelab maps onto every algorithm: Limit
// units per Window for each key, and the leaky bucket's queue length.
type Policy struct {
	Limit         int64
	Window        time.Duration
	LeakyCapacity int64 // requests that may wait in the leaky bucket's queue
}

// Rate returns the policy as a hotlimit.Rate (Limit per Window).
func (p Policy) Rate() hotlimit.Rate { return hotlimit.Rate{N: p.Limit, Per: p.Window} }

// Interval returns the emission interval ⌈Window/Limit⌉ of the buckets.
func (p Policy) Interval() time.Duration { return p.Rate().Interval() }

// Algorithm is one of the library's limiters configured for a Policy.
type Algorithm struct {
	Name    string          // short name for tables and legends, such as "token bucket"
	Policy  hotlimit.Policy // the hotlimit policy value passed to hotlimit.New
	Mapping string          // how the Policy was mapped onto it, for people
	// NA, when not empty, says why the algorithm cannot run this Policy
	// (for example a sliding log limit above hotlimit.MaxLogLimit, shown as
	// "n/a (limit too large)").
	NA string
	// Capacity is the largest cost the limiter can ever admit (its
	// Decision.Limit: Burst, Limit or Capacity+1); a costlier request is
	// denied every time. 0 when NA is set.
	Capacity int64
}

// Runnable reports whether any of algos can run its policy.
func Runnable(algos []Algorithm) bool {
	for _, a := range algos {
		if a.NA == "" {
			return true
		}
	}
	return false
}

// maxDelay formats the leaky bucket's largest queueing delay, capacity
// intervals, without overflowing.
func maxDelay(capacity int64, interval time.Duration) string {
	if capacity < 0 || interval <= 0 {
		return "n/a"
	}
	d, ok := mulDur(capacity, interval)
	if !ok {
		return "beyond 292 years"
	}
	return d.String()
}

// Names of the algorithms, in the order Algorithms returns them.
const (
	TokenBucket   = "token bucket"
	FixedWindow   = "fixed window"
	SlidingWindow = "sliding window"
	SlidingLog    = "sliding log"
	LeakyBucket   = "leaky bucket"
)

// Algorithms maps p onto every algorithm, in a fixed order: token bucket
// (Rate Limit/Window, Burst Limit), fixed window and sliding-window counter
// (Limit, Window), the exact sliding log (Limit, Window) and the leaky
// bucket (Rate Limit/Window, Capacity p.LeakyCapacity). An algorithm that
// rejects the mapped configuration is returned with NA set, not dropped.
func Algorithms(p Policy) []Algorithm {
	rate := p.Rate()
	tb := hotlimit.TokenBucket{Rate: rate, Burst: p.Limit}
	fw := hotlimit.FixedWindow{Limit: p.Limit, Window: p.Window}
	sw := hotlimit.SlidingWindow{Limit: p.Limit, Window: p.Window}
	sl := hotlimit.SlidingLog{Limit: p.Limit, Window: p.Window}
	lb := hotlimit.LeakyBucket{Rate: rate, Capacity: p.LeakyCapacity}
	as := []Algorithm{
		{Name: TokenBucket, Policy: tb, Mapping: fmt.Sprintf("TokenBucket{Rate: %v, Burst: %d}", rate, tb.Burst)},
		{Name: FixedWindow, Policy: fw, Mapping: fmt.Sprintf("FixedWindow{Limit: %d, Window: %v}", fw.Limit, fw.Window)},
		{Name: SlidingWindow, Policy: sw, Mapping: fmt.Sprintf("SlidingWindow{Limit: %d, Window: %v} (counter approximation)", sw.Limit, sw.Window)},
		{Name: SlidingLog, Policy: sl, Mapping: fmt.Sprintf("SlidingLog{Limit: %d, Window: %v} (exact)", sl.Limit, sl.Window)},
		{Name: LeakyBucket, Policy: lb, Mapping: fmt.Sprintf("LeakyBucket{Rate: %v, Capacity: %d} (one interval %v apart, max delay %s)",
			rate, lb.Capacity, p.Interval(), maxDelay(lb.Capacity, p.Interval()))},
	}
	if p.Limit > hotlimit.MaxLogLimit {
		as[3].NA = fmt.Sprintf("n/a (limit too large; SlidingLog.Limit ≤ %d)", hotlimit.MaxLogLimit)
	}
	for i := range as {
		if as[i].NA != "" {
			continue
		}
		l, err := newDecider(as[i].Policy, hotlimit.NewManualClock(), 0)
		if err != nil {
			as[i].NA = err.Error()
			continue
		}
		as[i].Capacity = l.AllowN("", 0).Limit
		l.Close()
	}
	return as
}

// Bound returns the most units a can admit to one key with start times in
// any interval of length window (what MaxInWindow measures), by the
// algorithm's own definition: the line its outcomes can reach and never
// cross, as long as the key's state is not removed (WithMaxKeys evicting
// it). It is computed from a.Capacity, the limiter's Decision.Limit
// (Burst, Limit or Capacity+1), and the emission interval T of the
// buckets, and saturates at math.MaxInt64. With c = a.Capacity:
//
//   - token bucket: c + ⌈window/T⌉ − 1. A full bucket admits c at once,
//     then one unit per T; an interval shorter than window holds fewer
//     than window/T of those.
//   - fixed window: 2c. An interval of length window overlaps two
//     windows, each admitting c (the boundary burst).
//   - sliding-window counter: 2c − 1. It weighs the previous window's
//     count as if spread evenly; all of it just before the edge and nearly
//     c more just before the next edge fall in one interval.
//   - sliding log: c, exactly.
//   - leaky bucket: ⌈window/T⌉, counted at start times: admitted units
//     start at least T apart, however many wait.
//
// It returns 0 when a cannot run (a.NA set).
func Bound(a Algorithm, window time.Duration) int64 {
	if a.NA != "" || window <= 0 {
		return 0
	}
	c := a.Capacity
	switch p := a.Policy.(type) {
	case hotlimit.TokenBucket:
		return addSat64(c, ceilDiv(window, p.Rate.Interval())-1)
	case hotlimit.FixedWindow:
		return addSat64(c, c)
	case hotlimit.SlidingWindow:
		return addSat64(c, c-1)
	case hotlimit.LeakyBucket:
		return ceilDiv(window, p.Rate.Interval())
	}
	return c // the sliding log
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0 and b > 0, without overflow.
func ceilDiv(a, b time.Duration) int64 {
	q := int64(a / b)
	if a%b != 0 {
		q++
	}
	return q
}

// addSat64 returns a+b for a, b ≥ 0, or math.MaxInt64 if that overflows.
func addSat64(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// decider is what ratelab needs from a limiter.
type decider interface {
	AllowN(key string, cost int64) hotlimit.Decision
	Close() error
}

// newDecider returns a limiter for policy on clk, bounded to maxKeys keys
// when maxKeys > 0, with no background sweeper (runs are deterministic).
func newDecider(policy hotlimit.Policy, clk *hotlimit.ManualClock, maxKeys int) (decider, error) {
	opts := []hotlimit.Option{hotlimit.WithClock(clk), hotlimit.WithSweepInterval(0)}
	if maxKeys > 0 {
		opts = append(opts, hotlimit.WithMaxKeys(maxKeys))
	}
	return hotlimit.New(policy, opts...)
}
