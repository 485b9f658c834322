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

// TestTallyExact counts from many goroutines at once, with refunds, and
// checks the sums, and that goroutines alive together spread over several
// stripes. Each goroutine notes its stripe and then waits until all have:
// a goroutine that has finished can hand its stack to one started later,
// and then they rightly share a stripe.
func TestTallyExact(t *testing.T) {
	tl := newTally()
	const g, each = 64, 1000
	var wg, noted sync.WaitGroup
	noted.Add(g)
	used := make([]int, g)
	for i := range g {
		wg.Go(func() {
			s := tl.mine()
			used[i] = int((uintptr(unsafe.Pointer(s)) - uintptr(unsafe.Pointer(&tl.stripes[0]))) / cacheLineSize)
			noted.Done()
			noted.Wait()
			for j := range each {
				tl.count(j%3 != 0)
				if j%10 == 0 {
					tl.countRefund()
				}
			}
		})
	}
	wg.Wait()
	allowed, denied, refunded := tl.sums()
	// per goroutine: 666 admissions, 334 denials and 100 refunds
	if allowed != g*666 || denied != g*334 || refunded != g*100 {
		t.Errorf("sums = %d allowed, %d denied, %d refunded; want %d, %d, %d", allowed, denied, refunded, g*666, g*334, g*100)
	}
	distinct := map[int]bool{}
	for _, u := range used {
		distinct[u] = true
	}
	if len(distinct) < 4 {
		t.Errorf("64 live goroutines used %d stripes of %d; want them spread", len(distinct), len(tl.stripes))
	}
}

// TestTallyRefundFirst: a refund counted on another stripe than its
// admission, or before it, changes no other counter.
func TestTallyRefundFirst(t *testing.T) {
	tl := newTally()
	tl.countRefund()
	if a, d, r := tl.sums(); a != 0 || d != 0 || r != 1 {
		t.Errorf("sums = %d, %d, %d; want 0, 0, 1", a, d, r)
	}
}
