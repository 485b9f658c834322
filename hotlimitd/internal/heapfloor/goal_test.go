package heapfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"
)

// startTuner starts a floor, stopped when the test ends, and returns its
// tuner.
func startTuner(t *testing.T, floor uint64) *tuner {
	t.Helper()
	stop, ok := Start(floor)
	if !ok {
		t.Fatal("Start did not start")
	}
	t.Cleanup(stop)
	return currentTuner()
}

// currentTuner returns the floor in effect (nil: none).
func currentTuner() *tuner {
	running.Lock()
	defer running.Unlock()
	return running.t
}

// grow recurses n frames of about 1 KiB each, then waits for done: its
// goroutine's stack holds about n KiB that each collection scans.
func grow(n int, ready chan<- struct{}, done <-chan struct{}) byte {
	var frame [1 << 10]byte
	frame[n%len(frame)] = byte(n)
	if n == 0 {
		ready <- struct{}{}
		<-done
		return frame[0]
	}
	return grow(n-1, ready, done) + frame[n%len(frame)]
}

// TestGoalWithStacks: the runtime's heap goal after the tuner set the
// percent is at most live + floor, the package's promise, also when the
// stacks the collection scans are larger than the live heap (the
// runtime grows them by the percent too: a percent of floor/live alone
// put the goal at about 140 MiB here, for a 64 MiB floor).
func TestGoalWithStacks(t *testing.T) {
	done := make(chan struct{})
	ready := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	for range 64 { // 64 goroutines of about 128 KiB of stack each
		wg.Go(func() { grow(128, ready, done) })
		<-ready
	}
	const floor = 64 << 20
	tu := startTuner(t, floor)
	s := []metrics.Sample{
		{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"}, {Name: "/gc/heap/goal:bytes"},
	}
	for range 10 { // until no collection came between the tuning and the read
		runtime.GC()
		metrics.Read(s)
		cycles := s[0].Value.Uint64()
		tu.mu.Lock()
		tu.tuneLocked() // as cycle does after the collection (which may have run it already)
		tu.mu.Unlock()
		metrics.Read(s)
		if s[0].Value.Uint64() != cycles {
			continue
		}
		live, stack, goal := s[1].Value.Uint64(), s[2].Value.Uint64(), s[3].Value.Uint64()
		if stack < 4<<20 {
			t.Fatalf("the stacks scanned are %d bytes, want over 4 MiB: the test does not test", stack)
		}
		if goal > live+floor {
			t.Errorf("live heap %d, stacks %d, a %d MiB floor: the heap goal is %.1f MiB, want at most live + floor", live, stack, floor>>20, float64(goal)/(1<<20))
		}
		return
	}
	t.Fatal("a collection came between each tuning and its read")
}

// TestGoalUnderMemoryLimit: a memory limit still bounds the heap with a
// floor in effect (the package doc's promise): the runtime's heap goal is
// under the limit, not live + floor.
func TestGoalUnderMemoryLimit(t *testing.T) {
	const floor = 4 << 30
	tu := startTuner(t, floor)
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	runtime.GC()
	metrics.Read(s)
	limit := s[0].Value.Uint64() + 32<<20 // 32 MiB over what the runtime maps now
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(limit)))
	tu.mu.Lock()
	tu.tuneLocked() // as after a collection
	tu.mu.Unlock()
	metrics.Read(s)
	if goal := s[1].Value.Uint64(); goal > limit {
		t.Errorf("with a %d GiB floor and a memory limit of %.1f MiB, the heap goal is %.1f MiB: want it under the limit", floor>>30, float64(limit)/(1<<20), float64(goal)/(1<<20))
	}
}
