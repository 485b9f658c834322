package hotlimit

import (
	"sync"
	"testing"
	"unsafe"
)

func TestTallyLayout(t *testing.T) {
	if sz := unsafe.Sizeof(tallyStripe{}); sz != cacheLineSize {
		t.Errorf("unsafe.Sizeof(tallyStripe{}) = %d, want %d", sz, cacheLineSize)
	}
	tl := newTally()
	n := len(tl.stripes)
	if n < minStripes || n > maxStripes || n&(n-1) != 0 {
		t.Errorf("%d stripes: want a power of two in [%d, %d]", n, minStripes, maxStripes)
	}
	if got := 1 << (64 - tl.shift); got != n {
		t.Errorf("shift %d selects among %d stripes, have %d", tl.shift, got, n)
	}
}

// TestTallyExact counts from many goroutines at once, with uncounts, and
// checks the sums, and that the goroutines spread over several stripes.
func TestTallyExact(t *testing.T) {
	tl := newTally()
	const g, each = 64, 1000
	var wg sync.WaitGroup
	start := make(chan struct{})
	used := make([]int, g)
	for i := range g {
		wg.Go(func() {
			<-start
			s := tl.mine()
			used[i] = int((uintptr(unsafe.Pointer(s)) - uintptr(unsafe.Pointer(&tl.stripes[0]))) / cacheLineSize)
			for j := range each {
				tl.count(j%3 != 0)
				if j%10 == 0 {
					tl.uncount()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	allowed, denied := tl.sums()
	// per goroutine: 666 admissions and 334 denials, then 100 admissions turned into denials
	if allowed != g*(666-100) || denied != g*(334+100) {
		t.Errorf("sums = %d allowed, %d denied; want %d, %d", allowed, denied, g*(666-100), g*(334+100))
	}
	distinct := map[int]bool{}
	for _, u := range used {
		distinct[u] = true
	}
	if len(distinct) < 4 {
		t.Errorf("64 live goroutines used %d stripes of %d; want them spread", len(distinct), len(tl.stripes))
	}
}

// TestTallyUncountFirst: an uncount read before its admission's stripe is
// summed must not wrap Allowed to 2^64−1.
func TestTallyUncountFirst(t *testing.T) {
	tl := newTally()
	tl.uncount()
	if a, d := tl.sums(); a != 0 || d != 1 {
		t.Errorf("sums = %d, %d; want 0, 1", a, d)
	}
}
