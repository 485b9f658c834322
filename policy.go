package hotlimit

import (
	"errors"
	"fmt"
	"math"
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

// TokenBucket admits Burst requests at once and refills at Rate, as the
// generic cell rate algorithm (GCRA): the key's state is its theoretical
// arrival time (TAT). Limit is Burst.
type TokenBucket struct {
	Rate  Rate
	Burst int64
}

// LeakyBucket shapes traffic to Rate, nginx limit_req style: one request
// starts at once and up to Capacity more may wait their turn, each one
// emission interval T after the previous, so the largest Delay is
// Capacity·T. Capacity 0 means no queue. Limit is Capacity+1.
type LeakyBucket struct {
	Rate     Rate
	Capacity int64
}

// FixedWindow admits at most Limit per window [k·Window, (k+1)·Window) of
// the limiter's clock. Up to twice Limit can pass across a window edge.
type FixedWindow struct {
	Limit  int64
	Window time.Duration
}

// SlidingWindow is the sliding-window counter: it weights the previous
// window's count by how much of it still overlaps the sliding window, and
// admits iff prev·(Window−elapsed)/Window + current + cost ≤ Limit, computed
// exactly in integers.
type SlidingWindow struct {
	Limit  int64
	Window time.Duration
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
