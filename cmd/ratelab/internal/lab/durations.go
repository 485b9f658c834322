package lab

import (
	"math"
	"math/bits"
	"time"
)

// Durations here are non-negative and may be large (a policy of one per
// year, a leaky bucket queue of thousands of intervals): every product, sum
// and shift of durations that is not bounded by a checked policy goes
// through these helpers, so none can wrap into a negative duration.

// mulDur returns n·d and true, or false if the product does not fit in a
// time.Duration. n and d must be ≥ 0.
func mulDur(n int64, d time.Duration) (time.Duration, bool) {
	hi, lo := bits.Mul64(uint64(n), uint64(d))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return time.Duration(lo), true
}

// addSat returns a+b, or the largest Duration if that overflows. a and b
// must be ≥ 0.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// shlSat returns d·2^k, or the largest Duration if that overflows. d must
// be ≥ 0 and k in [0, 62].
func shlSat(d time.Duration, k int) time.Duration {
	if d > math.MaxInt64>>k {
		return math.MaxInt64
	}
	return d << k
}

// durSum adds non-negative durations exactly, in 128 bits: a mean delay
// over many long leaky-bucket delays overflows a time.Duration sum.
type durSum struct{ hi, lo uint64 }

func (s *durSum) add(d time.Duration) {
	var c uint64
	s.lo, c = bits.Add64(s.lo, uint64(d), 0)
	s.hi += c
}

// mean returns the sum divided by n (> 0), rounded down. It fits in a
// Duration whenever every term did.
func (s durSum) mean(n int64) time.Duration {
	q, _ := bits.Div64(s.hi%uint64(n), s.lo, uint64(n))
	return time.Duration(q)
}
