package hotlimit

import (
	"errors"
	"fmt"
	"reflect"
	"time"
)

// Limits of the packed representations, checked by New.
const (
	// maxTime is where a limiter's clock saturates: 2^62−1 ns, about 146
	// years of ManualClock time, or the year 2116 on the default clock.
	// Keeping every instant below it leaves room for TAT arithmetic in
	// int64 without overflow.
	maxTime = 1<<62 - 1
	// maxTau bounds Burst·T (and (Capacity+1)·T): 2^61 ns, about 73 years.
	maxTau = 1 << 61
	// maxReserve bounds how far past now Wait may push a bucket's TAT.
	maxReserve = 1 << 60
	// maxWindow bounds a window's length, so that window indexes and
	// window starts stay below maxTime.
	maxWindow = 1 << 55
)

// Policy is a rate-limiting policy: a TokenBucket, LeakyBucket,
// FixedWindow, SlidingWindow or SlidingLog. The interface is sealed: only
// this package's policy types implement it, so handing New or SetPolicy
// anything else is a compile error. A pointer to a policy type is a Policy
// too (its method set holds the value's methods); New and SetPolicy use
// the value it points to, and return an error for a nil pointer.
type Policy interface {
	// params validates the policy and returns it as the engine uses it,
	// or an error naming the field and the value.
	params() (*params, error)
}

// Every policy type is a Policy, and so is the private policy of
// NewConcurrency.
var _ = []Policy{TokenBucket{}, LeakyBucket{}, FixedWindow{}, SlidingWindow{}, SlidingLog{}, concurrencyPolicy{}}

// newParams validates policy and returns its params. It rejects a nil
// pointer here, once for every type: a value method called through a nil
// pointer panics.
func newParams(policy Policy) (*params, error) {
	if policy == nil {
		return nil, errors.New("hotlimit: nil Policy (want a TokenBucket, LeakyBucket, FixedWindow, SlidingWindow or SlidingLog)")
	}
	if v := reflect.ValueOf(policy); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("hotlimit: nil *%s", v.Type().Elem().Name())
	}
	p, err := policy.params()
	if err != nil {
		return nil, err
	}
	p.info = p.describe() // once: a layered decision reports it (AllowLayersState)
	return p, nil
}

// TokenBucket admits Burst requests at once and refills at Rate, as the
// generic cell rate algorithm (GCRA): the key's state is its theoretical
// arrival time (TAT). A Decision's Limit is Burst.
type TokenBucket struct {
	Rate  Rate
	Burst int64
}

func (p TokenBucket) params() (*params, error) {
	if err := p.Rate.validate("TokenBucket.Rate"); err != nil {
		return nil, err
	}
	if p.Burst <= 0 {
		return nil, fmt.Errorf("hotlimit: TokenBucket.Burst must be > 0, got %d", p.Burst)
	}
	t := int64(p.Rate.Interval())
	if p.Burst > maxTau/t {
		return nil, fmt.Errorf("hotlimit: TokenBucket.Burst %d × interval %v exceeds %v: the bucket's state would overflow", p.Burst, time.Duration(t), time.Duration(maxTau))
	}
	return &params{policy: p, kind: kindTokenBucket, limit: p.Burst, g: newGCRA(p.Rate, p.Burst, false)}, nil
}

// LeakyBucket shapes traffic to Rate, nginx limit_req style: one request
// starts at once and up to Capacity more may wait their turn, each one
// emission interval T after the previous, so the largest Delay is
// Capacity·T. Capacity 0 means no queue. Limit is Capacity+1.
type LeakyBucket struct {
	Rate     Rate
	Capacity int64
}

func (p LeakyBucket) params() (*params, error) {
	if err := p.Rate.validate("LeakyBucket.Rate"); err != nil {
		return nil, err
	}
	if p.Capacity < 0 {
		return nil, fmt.Errorf("hotlimit: LeakyBucket.Capacity must be ≥ 0 (0: no queue), got %d", p.Capacity)
	}
	t := int64(p.Rate.Interval())
	if p.Capacity >= maxTau/t {
		return nil, fmt.Errorf("hotlimit: LeakyBucket.Capacity %d × interval %v exceeds %v: the bucket's state would overflow", p.Capacity, time.Duration(t), time.Duration(maxTau))
	}
	return &params{policy: p, kind: kindLeakyBucket, limit: p.Capacity + 1, g: newGCRA(p.Rate, p.Capacity+1, true)}, nil
}

// FixedWindow admits at most Limit per window [k·Window, (k+1)·Window) of
// the limiter's clock. Up to twice Limit can pass across a window edge.
type FixedWindow struct {
	Limit  int64
	Window time.Duration
}

func (p FixedWindow) params() (*params, error) {
	return newWindowParams(p, "FixedWindow", p.Limit, p.Window, false)
}

// SlidingWindow is the sliding-window counter: it weights the previous
// window's count by how much of it still overlaps the sliding window, and
// admits iff prev·(Window−elapsed)/Window + current + cost ≤ Limit, computed
// exactly in integers.
type SlidingWindow struct {
	Limit  int64
	Window time.Duration
}

func (p SlidingWindow) params() (*params, error) {
	return newWindowParams(p, "SlidingWindow", p.Limit, p.Window, true)
}

// newWindowParams validates the fields shared by the window policies and
// lays out their packed state.
func newWindowParams(policy Policy, name string, limit int64, w time.Duration, sliding bool) (*params, error) {
	switch {
	case limit <= 0:
		return nil, fmt.Errorf("hotlimit: %s.Limit must be > 0, got %d", name, limit)
	case w <= 0:
		return nil, fmt.Errorf("hotlimit: %s.Window must be > 0, got %v", name, w)
	case w > maxWindow:
		return nil, fmt.Errorf("hotlimit: %s.Window %v exceeds %v", name, w, time.Duration(maxWindow))
	}
	x, ok := newWindow(limit, w, sliding)
	if !ok {
		most := int64(1)<<(63-minIndexBits) - 1
		if sliding {
			most = int64(1)<<((63-minIndexBits)/2) - 1
		}
		return nil, fmt.Errorf("hotlimit: %s.Limit %d does not fit the packed state (at most %d)", name, limit, most)
	}
	if h := x.horizon(); h < minHorizon {
		return nil, fmt.Errorf("hotlimit: %s.Limit %d with Window %v: the packed state could tell windows apart only %v back (at least %v needed); use a longer Window or a smaller Limit", name, limit, w, h, minHorizon)
	}
	p := &params{policy: policy, kind: kindFixedWindow, limit: limit, win: x}
	if sliding {
		p.kind = kindSlidingWindow
	}
	return p, nil
}

// SlidingLog is the exact sliding window: at most Limit units are admitted
// in every interval of length Window, whatever its start. It keeps the
// instant of each admitted unit still inside the window, so a key costs
// about 8·Limit bytes plus a map entry, and Limit is at most MaxLogLimit.
// Use it for small limits where the sliding-window counter's weighting is
// not good enough (5 login attempts per 15 minutes); use SlidingWindow for
// large ones.
type SlidingLog struct {
	Limit  int64
	Window time.Duration
}

// MaxLogLimit is the largest SlidingLog.Limit New accepts.
const MaxLogLimit = 1024

func (p SlidingLog) params() (*params, error) {
	switch {
	case p.Limit <= 0:
		return nil, fmt.Errorf("hotlimit: SlidingLog.Limit must be > 0, got %d", p.Limit)
	case p.Limit > MaxLogLimit:
		return nil, fmt.Errorf("hotlimit: SlidingLog.Limit %d exceeds MaxLogLimit (%d): the log keeps one instant per admitted unit; use SlidingWindow (the sliding-window counter) for large limits", p.Limit, MaxLogLimit)
	case p.Window <= 0:
		return nil, fmt.Errorf("hotlimit: SlidingLog.Window must be > 0, got %v", p.Window)
	case p.Window > maxWindow:
		return nil, fmt.Errorf("hotlimit: SlidingLog.Window %v exceeds %v", p.Window, time.Duration(maxWindow))
	}
	return &params{policy: p, kind: kindSlidingLog, limit: p.Limit, logW: int64(p.Window)}, nil
}
