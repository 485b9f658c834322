package httpretry

import (
	"math/rand/v2"
	"time"
)

// backoff returns the full-jitter backoff before retry n+1: uniform in
// [0, min(MaxDelay, BaseDelay·2^n)], both ends included.
func (t *Transport) backoff(n int) time.Duration {
	return t.jitter(backoffCap(t.BaseDelay, t.MaxDelay, n))
}

// backoffCap returns min(maxDelay, base·2^n) without overflow, after
// applying the defaults.
func backoffCap(base, maxDelay time.Duration, n int) time.Duration {
	if base <= 0 {
		base = DefaultBaseDelay
	}
	if maxDelay <= 0 {
		maxDelay = DefaultMaxDelay
	}
	if base >= maxDelay {
		return maxDelay
	}
	for i := 0; i < n && base < maxDelay; i++ {
		base *= 2
		if base <= 0 {
			return maxDelay // doubled past MaxInt64
		}
	}
	return min(base, maxDelay)
}

// jitter returns a uniform value in [0, ceil].
func (t *Transport) jitter(ceil time.Duration) time.Duration {
	if ceil <= 0 {
		return 0
	}
	n := int64(ceil)
	if n == int64(maxDuration) {
		n-- // keep n+1 in range; the lost nanosecond is immaterial
	}
	if t.randN != nil {
		return time.Duration(t.randN(n + 1))
	}
	return time.Duration(rand.Int64N(n + 1))
}
