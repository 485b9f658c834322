package hotlimit

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Never is the RetryAfter of a request that can never be admitted: its cost
// is negative or larger than the policy's capacity.
const Never time.Duration = math.MaxInt64

// Rate is N events per Per. The zero Rate is invalid.
type Rate struct {
	N   int64
	Per time.Duration
}

// PerSecond returns a Rate of n events per second.
func PerSecond(n int64) Rate { return Rate{N: n, Per: time.Second} }

// PerMinute returns a Rate of n events per minute.
func PerMinute(n int64) Rate { return Rate{N: n, Per: time.Minute} }

// PerHour returns a Rate of n events per hour.
func PerHour(n int64) Rate { return Rate{N: n, Per: time.Hour} }

// String formats r in the form ParseRate reads, such as "100/1s".
func (r Rate) String() string { return strconv.FormatInt(r.N, 10) + "/" + r.Per.String() }

// Interval returns the emission interval T = ⌈Per/N⌉: the time one event
// takes to be replenished. It rounds up, towards denying; the error is under
// 1 ns per event. It returns 0 for a Rate that validate rejects.
func (r Rate) Interval() time.Duration {
	if r.N <= 0 || r.Per <= 0 {
		return 0
	}
	return time.Duration((int64(r.Per)-1)/r.N + 1)
}

// validate reports why r cannot be used, naming the field with prefix.
func (r Rate) validate(field string) error {
	switch {
	case r.N <= 0:
		return fmt.Errorf("hotlimit: %s.N must be > 0, got %d", field, r.N)
	case r.Per <= 0:
		return fmt.Errorf("hotlimit: %s.Per must be > 0, got %v", field, r.Per)
	case int64(r.Per) < r.N:
		// T = ⌈Per/N⌉ would round a sub-nanosecond interval up to 1 ns,
		// an error of more than 1 ns per event: reject, don't approximate.
		return fmt.Errorf("hotlimit: %s %v is faster than 1 event per nanosecond", field, r)
	}
	return nil
}

// ParseRate parses a rate written as "N/unit" or "N/duration", such as
// "100/s", "100/1m", "5/250ms" or "1/24h". Units are those of
// time.ParseDuration; a bare unit means one of it. N must be a positive
// integer and the duration positive.
func ParseRate(s string) (Rate, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: want N/duration, such as 100/s or 5/250ms", s)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: count: %w", s, err)
	}
	per = strings.TrimSpace(per)
	if per != "" && (per[0] < '0' || per[0] > '9') && !strings.ContainsRune(".+-", rune(per[0])) {
		per = "1" + per // "s" means "1s"; "-1m" stays negative, and is rejected below
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: duration: %w", s, err)
	}
	if d <= 0 {
		return Rate{}, fmt.Errorf("hotlimit: rate %q: the duration must be positive, got %v", s, d)
	}
	r := Rate{N: n, Per: d}
	if err := r.validate("rate"); err != nil {
		return Rate{}, fmt.Errorf("%w (parsing %q)", err, s)
	}
	return r, nil
}

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
	return policy.params()
}

// TokenBucket admits Burst requests at once and refills at Rate, as the
// generic cell rate algorithm (GCRA): the key's state is its theoretical
// arrival time (TAT). Limit is Burst.
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

// Errors returned by Wait.
var (
	// ErrInvalidCost: the cost is negative or above the policy's Limit,
	// so the request can never be admitted.
	ErrInvalidCost = errors.New("hotlimit: cost is negative or exceeds the policy's limit")
	// ErrDeadline: the request could not be admitted before the context's
	// deadline; nothing was consumed.
	ErrDeadline = errors.New("hotlimit: request would not be admitted before the context deadline")
	// ErrKeyTooLong: the key is longer than MaxKeyLen.
	ErrKeyTooLong = errors.New("hotlimit: key longer than MaxKeyLen")
)

// MaxKeyLen is the longest key a Limiter accepts. A longer key is denied
// with RetryAfter = Never and creates no state: no legitimate identity is
// that long, and accepting it would let a client spend the limiter's
// memory on key bytes.
const MaxKeyLen = 64 << 10
