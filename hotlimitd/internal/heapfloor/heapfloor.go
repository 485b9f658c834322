// Package heapfloor keeps the garbage collector from running every few
// megabytes of allocation while the live heap is small, as it does at
// GOGC=100: after each collection it sets the GC percent so that the next
// collection starts once about floor bytes more than the live heap are
// allocated, and puts GOGC=100 back when the live heap (with the stacks
// and globals) outgrows floor.
//
// A service whose live heap is a few megabytes (hotlimitd on Redis holds
// little more than its connections' buffers) and which allocates a few
// kilobytes a request collects tens of times a second at GOGC=100: each
// collection scans every goroutine's stack, turns on write barriers for
// its mark phase and shrinks the stacks that the next requests grow
// again. With a floor larger than the live heap, stacks and globals,
// the runtime's heap goal is at most live + floor (the runtime grows the
// stacks and globals it scans by the percent too, as if they were heap:
// the percent counts them), and the collections are as many times fewer
// as floor is larger than those. A memory limit (GOMEMLIMIT,
// debug.SetMemoryLimit) still bounds the heap: the runtime collects
// sooner as it nears the limit, whatever the percent.
package heapfloor

import (
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
)

// Default is cmd/hotlimitd's floor (its -gc-heap-floor), which rlsbench
// serves hotlimitd with too.
const Default Size = 64 << 20

// basePercent is the GC percent below the floor's effect: GOGC's
// default, which the caller keeps (Start is for a process whose GOGC
// was not set).
const basePercent = 100

// heapMinimum is the runtime's least heap goal at GOGC=100 (its
// defaultHeapMinimum, 4 MiB); at percent p the runtime's least goal is
// heapMinimum × p / 100, which percent keeps below live + floor.
const heapMinimum = 4 << 20

// Percent returns the GC percent whose heap goal, after a collection
// that found live bytes of live heap and scanned roots bytes of stacks
// and globals besides it, is at most live + floor. The runtime's goal at
// percent p is live + (live + roots) × p / 100 (the stacks and globals
// count as heap to grow by), so the percent is floor × 100 / (live +
// roots); but never below basePercent (a live heap and roots over floor
// collect as at GOGC=100) and never so high that the runtime's least
// goal, which grows with the percent, exceeds live + floor.
func Percent(live, roots, floor uint64) int {
	if floor == 0 {
		return basePercent
	}
	// no overflow below
	live, roots, floor = min(live, maxBytes), min(roots, maxBytes), min(floor, maxBytes)
	hi := (live + floor) * 100 / heapMinimum // the percent whose least goal is live + floor
	p := hi
	if base := live + roots; base > 0 && floor*100/base < p {
		p = floor * 100 / base
	}
	if p < basePercent {
		return basePercent
	}
	return int(min(p, maxPercent))
}

// maxBytes bounds the sizes Percent computes with (a pebibyte: no heap
// is larger), and maxPercent the percent it returns.
const (
	maxBytes   = 1 << 50
	maxPercent = 1 << 30
)

// UserGOGC reports the GOGC the user chose, as the runtime reads it:
// "off" or a decimal integer that fits 32 bits. An unset, empty or
// malformed GOGC, which the runtime takes as 100, reports false: the
// floor may then be started.
func UserGOGC() (value string, set bool) {
	v := os.Getenv("GOGC")
	if v == "off" {
		return v, true
	}
	if _, err := strconv.ParseInt(v, 10, 32); err == nil {
		return v, true
	}
	return "", false
}

// Start sets the GC percent for floor bytes now (from the live heap of
// the last collection) and again after every collection, until stop is
// called, which puts basePercent back. The percent is the process's: one
// floor at a time. Start reports false, and changes nothing, when a
// floor is in effect already or floor is 0; stop then does nothing. Call
// it in a process whose GOGC the user did not set (UserGOGC): it
// overrides GOGC.
func Start(floor uint64) (stop func(), started bool) {
	running.Lock()
	defer running.Unlock()
	if floor == 0 || running.t != nil {
		return func() {}, false
	}
	t := &tuner{floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	running.t = t
	t.mu.Lock()
	t.tuneLocked()
	t.mu.Unlock()
	t.arm()
	return t.stop, true
}

// running is the floor in effect.
var running struct {
	sync.Mutex
	t *tuner // guarded by the mutex; nil: none
}

// tuner is Start's state.
type tuner struct {
	floor uint64

	mu      sync.Mutex
	stopped bool             // guarded by mu
	sample  []metrics.Sample // guarded by mu
	percent int              // guarded by mu: the percent last set
}

// block is what arm watches: an object of no pointers big enough that
// the runtime does not pack it with others (a cleanup of a tiny object
// may never run).
type block [64]byte

// arm has cycle called after the next collection: a new block is
// unreachable at once, so the next collection frees it and runs cycle.
func (t *tuner) arm() {
	runtime.AddCleanup(new(block), t.cycle, struct{}{})
}

// cycle sets the percent for the collection that just ended, and watches
// for the next one.
func (t *tuner) cycle(struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.tuneLocked()
	t.arm()
}

// tuneLocked sets the percent for the live heap, stacks and globals of
// the last collection, when it differs from the one set.
func (t *tuner) tuneLocked() {
	metrics.Read(t.sample)
	var v [3]uint64 // live heap, stacks, globals
	for i := range v {
		if t.sample[i].Value.Kind() == metrics.KindUint64 {
			v[i] = t.sample[i].Value.Uint64()
		}
	}
	if p := Percent(v[0], v[1]+v[2], t.floor); p != t.percent {
		debug.SetGCPercent(p)
		t.percent = p
	}
}

// stop stops tuning and puts basePercent back.
func (t *tuner) stop() {
	running.Lock()
	defer running.Unlock()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		debug.SetGCPercent(basePercent)
		running.t = nil
	}
}

// Size is a number of bytes as GOMEMLIMIT writes one: an integer, then
// B, KiB, MiB, GiB or TiB, or no suffix for bytes ("64MiB", "0"). It is
// a flag.Value.
type Size uint64

// String writes s with the largest suffix that divides it.
func (s Size) String() string {
	n, i := uint64(s), 0
	for n != 0 && n%1024 == 0 && i < len(sizeSuffixes)-1 {
		n /= 1024
		i++
	}
	return strconv.FormatUint(n, 10) + sizeSuffixes[i]
}

var sizeSuffixes = []string{"B", "KiB", "MiB", "GiB", "TiB"}

// Set parses v into s.
func (s *Size) Set(v string) error {
	num, shift := v, 0
	for i := len(sizeSuffixes) - 1; i >= 0; i-- {
		if strings.HasSuffix(v, sizeSuffixes[i]) {
			num, shift = strings.TrimSuffix(v, sizeSuffixes[i]), 10*i
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		return errors.New("want a size in bytes: an integer, then B, KiB, MiB, GiB or TiB (64MiB)")
	}
	if n > maxBytes>>shift {
		return errors.New("want a size of at most 1024TiB")
	}
	*s = Size(n << shift)
	return nil
}

// Get returns s, as flag.Getter does.
func (s *Size) Get() any { return *s }
