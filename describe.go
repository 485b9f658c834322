package hotlimit

import (
	"strconv"
	"time"
)

// Algorithm names the algorithm of a policy.
type Algorithm uint8

// The algorithms, one per policy type.
const (
	AlgorithmTokenBucket   Algorithm = iota + 1 // TokenBucket
	AlgorithmLeakyBucket                        // LeakyBucket
	AlgorithmFixedWindow                        // FixedWindow
	AlgorithmSlidingWindow                      // SlidingWindow
	AlgorithmSlidingLog                         // SlidingLog
	AlgorithmConcurrency                        // the policy of NewConcurrency
)

// String returns the policy type's name: "TokenBucket", "LeakyBucket",
// "FixedWindow", "SlidingWindow", "SlidingLog" or "Concurrency".
func (a Algorithm) String() string {
	if a >= AlgorithmTokenBucket && a <= AlgorithmConcurrency {
		return kind(a).String() // kind and Algorithm number the algorithms alike
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}

// PolicyInfo describes a policy, read-only: what an integration shows of
// it (a header's quota and window, a metric's algorithm) without
// switching on the policy's type. Describe and Limiter.Describe return it.
type PolicyInfo struct {
	Algorithm Algorithm
	// Limit is the capacity, what Decision.Limit reports: Burst for a
	// TokenBucket, Capacity+1 for a LeakyBucket, Limit for the windows
	// and the concurrency limit.
	Limit int64
	// Window is the window of FixedWindow, SlidingWindow and SlidingLog;
	// 0 for the others.
	Window time.Duration
	// Rate is the rate of TokenBucket and LeakyBucket; zero for the
	// others.
	Rate Rate
	// Burst is TokenBucket.Burst, and Capacity is LeakyBucket.Capacity
	// (the requests that may wait); 0 for the other policies.
	Burst, Capacity int64
}

// Period returns how long the policy takes to give back its whole
// capacity: Window for the windows, Limit emission intervals for the
// buckets (an empty bucket refilled), saturating at Never; 0 for the
// concurrency limit, which has no notion of time.
func (pi PolicyInfo) Period() time.Duration {
	if pi.Window > 0 {
		return pi.Window
	}
	t := pi.Rate.Interval()
	if t <= 0 || pi.Limit <= 0 {
		return 0
	}
	if pi.Limit > int64(Never/t) {
		return Never
	}
	return t * time.Duration(pi.Limit)
}

// Describe validates p as New does and describes it. The error is New's.
func Describe(p Policy) (PolicyInfo, error) {
	pp, err := newParams(p)
	if err != nil {
		return PolicyInfo{}, err
	}
	return pp.info, nil
}

// Describe describes the policy in force now (SetPolicy may change it at
// any moment: the policy a given decision was made under is reported by
// AllowLayersState).
func (l *Limiter) Describe() PolicyInfo { return l.p.Load().info }

// describe returns p's PolicyInfo.
func (p *params) describe() PolicyInfo {
	pi := PolicyInfo{Algorithm: Algorithm(p.kind), Limit: p.limit}
	switch v := p.policy.(type) {
	case TokenBucket:
		pi.Rate, pi.Burst = v.Rate, v.Burst
	case LeakyBucket:
		pi.Rate, pi.Capacity = v.Rate, v.Capacity
	case FixedWindow:
		pi.Window = v.Window
	case SlidingWindow:
		pi.Window = v.Window
	case SlidingLog:
		pi.Window = v.Window
	}
	return pi
}
