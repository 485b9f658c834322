package lab

import (
	"fmt"
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
