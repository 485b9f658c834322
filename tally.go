package hotlimit

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// tally counts a limiter's decisions and refunds for Stats.Allowed,
// Stats.Denied and Stats.Refunded.
//
// A single pair of counters (or one per shard) would be a second cache
// line that every core writes on every decision: with one hot key on two
// cores, that line moves between them as often as the key's own word
// does. The bench module's RESULTS.md ("Decision counters") has the cost,
// https://github.com/hotlimit/hotlimit/blob/main/bench/RESULTS.md. Instead the
// counters are striped, and a goroutine counts on the stripe picked by the
// address of its own stack: goroutines run on distinct stacks, so
// concurrent callers land on different lines unless two of them hash to the
// same stripe, and a goroutine keeps using the same line while its stack
// stays put. The counts are exact; only their placement varies.
//
// Every counter only ever grows: a refund is counted on its own counter,
// never by taking an admission back, so a reader summing the stripes while
// refunds happen can never see a total go down (Prometheus' rate() reads a
// decrease as a counter reset).
type tally struct {
	stripes []tallyStripe
	shift   uint // stripe index = mixed stack address >> shift
}

// tallyStripe is one stripe, alone on its cache line.
type tallyStripe struct {
	allowed  atomic.Uint64
	denied   atomic.Uint64
	refunded atomic.Uint64
	_        [cacheLineSize - 24]byte
}

// Stripes per limiter: four per P, at least minStripes, at most
// maxStripes (256 × 128 B = 32 KiB).
const (
	minStripes = 16
	maxStripes = 256
)

func newTally() tally {
	n := minStripes
	for n < 4*runtime.GOMAXPROCS(0) && n < maxStripes {
		n <<= 1
	}
	shift := uint(64)
	for m := n; m > 1; m >>= 1 {
		shift--
	}
	return tally{stripes: make([]tallyStripe, n), shift: shift}
}

// mine returns the calling goroutine's stripe. Stacks start at 2 KiB, so
// the address is taken in 2 KiB units and spread by a Fibonacci multiply,
// which sends neighbouring stacks to distant stripes.
func (t *tally) mine() *tallyStripe {
	var anchor byte
	a := uint64(uintptr(unsafe.Pointer(&anchor))) >> 11
	return &t.stripes[(a*0x9e3779b97f4a7c15)>>t.shift]
}

// count records one decision.
func (t *tally) count(allowed bool) {
	s := t.mine()
	if allowed {
		s.allowed.Add(1)
	} else {
		s.denied.Add(1)
	}
}

// countRefund records one admission given back (AllowLayers undoing a
// layer, an Admission's Refund, Wait giving its slot back). The admission stays counted.
func (t *tally) countRefund() {
	t.mine().refunded.Add(1)
}

// sums returns the totals. Each stripe's counters only grow, so each
// total read later is at least the one read before.
func (t *tally) sums() (allowed, denied, refunded uint64) {
	for i := range t.stripes {
		s := &t.stripes[i]
		allowed += s.allowed.Load()
		denied += s.denied.Load()
		refunded += s.refunded.Load()
	}
	return allowed, denied, refunded
}
