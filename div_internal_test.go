package hotlimit

import (
	"math"
	"math/rand/v2"
	"testing"
)

func checkDiv(t *testing.T, d, x uint64) {
	t.Helper()
	q, r := newDivisor(d).div(x)
	if q != x/d || r != x%d {
		t.Fatalf("div(%d, %d) = %d r %d, want %d r %d", x, d, q, r, x/d, x%d)
	}
}

// TestDivisor checks the multiply-based division against the hardware
// divide at the edges (d = 1, powers of two and their neighbours, d near
// 2^64; x a multiple of d, one below, the maximum) and at random.
func TestDivisor(t *testing.T) {
	var ds []uint64
	for s := 0; s < 64; s++ {
		p := uint64(1) << s
		ds = append(ds, p, p+1, p-1, p*3)
	}
	ds = append(ds, math.MaxUint64, math.MaxUint64-1, 1_000_000_000, 333_333_334, 86_400_000_000_000)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, d := range ds {
		if d == 0 {
			continue
		}
		for _, x := range []uint64{0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d, math.MaxUint64, math.MaxUint64 - 1, math.MaxUint64 / d * d, math.MaxUint64/d*d - 1, 1 << 63} {
			checkDiv(t, d, x)
		}
		for range 200 {
			checkDiv(t, d, rng.Uint64())
			checkDiv(t, d, rng.Uint64N(d)*rng.Uint64N(1<<20)+rng.Uint64N(d))
		}
	}
	for range 100_000 {
		d := rng.Uint64() >> rng.UintN(64)
		if d == 0 {
			d = 1
		}
		checkDiv(t, d, rng.Uint64()>>rng.UintN(64))
	}
}

func FuzzDivisor(f *testing.F) {
	f.Add(uint64(3), uint64(10))
	f.Add(uint64(1), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, d, x uint64) {
		if d == 0 {
			return
		}
		checkDiv(t, d, x)
	})
}
