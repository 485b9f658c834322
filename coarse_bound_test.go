package hotlimit_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestLaggingClockBound pins down what a lagging clock (such as a
// CoarseClock) does to a token bucket, measured on true time. Each request
// arrives at a true instant t but is decided at a reading r in [t−L, t]. A
// decision is exact for its reading, so a request is booked as if it came
// up to L early, and over any true interval [a, b] the bucket admits at
// most Burst + ⌊(b−a+L)/T⌋ units: up to ⌊L/T⌋ more than the policy's
// Burst + ⌊(b−a)/T⌋, never more than that. The test checks the bound over
// every interval between two admissions, for monotone readings (a cache)
// and for readings that also go back (goroutines holding older readings),
// and reports how often the policy's own bound was exceeded.
func TestLaggingClockBound(t *testing.T) {
	const (
		T     = 10 * time.Millisecond
		burst = 3
		L     = 35 * time.Millisecond
		n     = 1500
	)
	for _, monotone := range []bool{true, false} {
		exceeded := 0
		for seed := range uint64(20) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clk := hotlimit.NewManualClock()
			lim, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: T}, Burst: burst},
				hotlimit.WithClock(clk), hotlimit.WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			var admitted []time.Duration // true instants
			now, last := time.Hour, time.Duration(0)
			for range n {
				now += time.Duration(rng.Int64N(int64(2 * T / 3)))
				r := now - time.Duration(rng.Int64N(int64(L)+1))
				if monotone {
					r = max(r, last)
				}
				last = r
				clk.Set(r)
				if lim.Allow("k").Allowed {
					admitted = append(admitted, now)
				}
			}
			lim.Close()
			for i := range admitted {
				for j := i; j < len(admitted); j++ {
					count := int64(j - i + 1)
					span := admitted[j] - admitted[i]
					if bound := burst + int64((span+L)/T); count > bound {
						t.Fatalf("monotone=%v seed %d: %d admissions in a true interval of %v, bound Burst + ⌊(span+L)/T⌋ = %d", monotone, seed, count, span, bound)
					}
					if count > burst+int64(span/T) {
						exceeded++
					}
				}
			}
		}
		t.Logf("monotone=%v: %d true intervals over the policy's own bound (within the lag allowance)", monotone, exceeded)
	}
}
