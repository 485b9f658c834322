package redislimit

import (
	"fmt"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Script kinds; they match the "kind" argument of script.lua.
// The leaky bucket is the token bucket's algorithm (kind 1) with a
// capacity of Capacity+1 and a Delay the Go side derives from the reply.
const (
	kindTokenBucket   = 1
	kindFixedWindow   = 2
	kindSlidingWindow = 3
	kindSlidingLog    = 4
)

// maxMicros bounds every duration (T, Burst·T, W) and every Limit that a
// policy hands the script: 2^50 µs is about 35 years. With the server's
// Unix time (about 2^50.6 µs until the year 2255) every sum the script
// forms stays below 2^52, and its products go through an exact
// multiply-divide, so Lua's doubles hold every value exactly.
const maxMicros = 1 << 50

// spec is a policy as the script sees it, in integer microseconds.
type spec struct {
	kind  int
	a     int64 // T (token bucket) or W (windows), µs
	tau   int64 // Burst·T, µs (token bucket only)
	limit int64 // Burst, Capacity+1 or Limit
	leaky bool  // a LeakyBucket: an admission reports Delay
}

// newSpec converts a hotlimit policy value (or a pointer to one) into a
// spec, with an error naming the field for what the script cannot do
// exactly.
//
// The token bucket's interval T is rounded up to a whole microsecond,
// towards denying: PerSecond(3) admits one request every 333,334 µs where
// the in-process limiter uses 333,333,334 ns. A window must be a whole
// number of microseconds: rounding it would move the window boundaries,
// so such a window is rejected.
func newSpec(policy hotlimit.Policy) (spec, error) {
	policy, err := deref(policy)
	if err != nil {
		return spec{}, err
	}
	// The in-process limiter validates the same fields first, with the
	// same messages.
	switch p := policy.(type) {
	case hotlimit.LeakyBucket:
		return bucketSpec("LeakyBucket", "Capacity+1", p.Rate, p.Capacity+1, p.Capacity < 0, true)
	case hotlimit.TokenBucket:
		return bucketSpec("TokenBucket", "Burst", p.Rate, p.Burst, p.Burst <= 0, false)
	case hotlimit.SlidingLog:
		if p.Limit > hotlimit.MaxLogLimit {
			return spec{}, fmt.Errorf("redislimit: SlidingLog.Limit %d exceeds %d", p.Limit, hotlimit.MaxLogLimit)
		}
		return windowSpec("SlidingLog", kindSlidingLog, p.Limit, p.Window)
	case hotlimit.FixedWindow:
		return windowSpec("FixedWindow", kindFixedWindow, p.Limit, p.Window)
	case hotlimit.SlidingWindow:
		return windowSpec("SlidingWindow", kindSlidingWindow, p.Limit, p.Window)
	case nil:
		return spec{}, fmt.Errorf("redislimit: nil policy")
	}
	return spec{}, fmt.Errorf("redislimit: policy %T is not supported on Redis (use hotlimit.TokenBucket, LeakyBucket, FixedWindow, SlidingWindow or SlidingLog)", policy)
}

// deref returns the policy a pointer to a policy value points to (an
// error for a nil one), or policy itself.
func deref(policy hotlimit.Policy) (hotlimit.Policy, error) {
	switch p := policy.(type) {
	case *hotlimit.TokenBucket:
		return derefPtr(p)
	case *hotlimit.FixedWindow:
		return derefPtr(p)
	case *hotlimit.SlidingWindow:
		return derefPtr(p)
	case *hotlimit.LeakyBucket:
		return derefPtr(p)
	case *hotlimit.SlidingLog:
		return derefPtr(p)
	}
	return policy, nil
}

func derefPtr[T hotlimit.Policy](p *T) (hotlimit.Policy, error) {
	if p == nil {
		return nil, fmt.Errorf("redislimit: nil %T", p)
	}
	return *p, nil
}

// bucketSpec is the spec of a token bucket (kind 1) of limit units at
// rate, named name, whose limit field is field (for the messages); bad
// says the limit's field is out of range, leaky that it is a LeakyBucket.
func bucketSpec(name, field string, r hotlimit.Rate, limit int64, bad, leaky bool) (spec, error) {
	switch {
	case r.N <= 0:
		return spec{}, fmt.Errorf("redislimit: %s.Rate.N must be > 0, got %d", name, r.N)
	case r.Per <= 0:
		return spec{}, fmt.Errorf("redislimit: %s.Rate.Per must be > 0, got %v", name, r.Per)
	case bad && leaky:
		return spec{}, fmt.Errorf("redislimit: LeakyBucket.Capacity must be ≥ 0, got %d", limit-1)
	case bad:
		return spec{}, fmt.Errorf("redislimit: TokenBucket.Burst must be > 0, got %d", limit)
	}
	t := ceilMicros(r.Interval())
	if limit > maxMicros/t {
		return spec{}, fmt.Errorf("redislimit: %s.%s %d × interval %dµs exceeds 2^50µs", name, field, limit, t)
	}
	return spec{kind: kindTokenBucket, a: t, tau: limit * t, limit: limit, leaky: leaky}, nil
}

func windowSpec(name string, kind int, limit int64, w time.Duration) (spec, error) {
	switch {
	case limit <= 0:
		return spec{}, fmt.Errorf("redislimit: %s.Limit must be > 0, got %d", name, limit)
	case limit > maxMicros:
		return spec{}, fmt.Errorf("redislimit: %s.Limit %d exceeds 2^50", name, limit)
	case w <= 0:
		return spec{}, fmt.Errorf("redislimit: %s.Window must be > 0, got %v", name, w)
	case w%time.Microsecond != 0:
		return spec{}, fmt.Errorf("redislimit: %s.Window %v is not a whole number of microseconds", name, w)
	case w/time.Microsecond > maxMicros:
		return spec{}, fmt.Errorf("redislimit: %s.Window %v exceeds 2^50µs", name, w)
	}
	return spec{kind: kind, a: int64(w / time.Microsecond), limit: limit}, nil
}

// ceilMicros returns d in microseconds, rounded up; d > 0.
func ceilMicros(d time.Duration) int64 { return int64((d-1)/time.Microsecond) + 1 }
