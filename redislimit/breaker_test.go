package redislimit

import (
	"sync"
	"testing"
	"time"
)

// fakeTime is a settable monotonic clock for the breaker.
type fakeTime struct{ t time.Duration }

func (f *fakeTime) now() time.Duration { return f.t }

func TestBreakerStates(t *testing.T) {
	var ft fakeTime
	b := NewBreaker(3, time.Second)
	b.now = ft.now
	fail := func() {
		t.Helper()
		if !acq(b) {
			t.Fatal("acquire refused while closed")
		}
		b.done(false)
	}
	fail()
	fail()
	if b.Open() {
		t.Fatal("open after 2 of 3 failures")
	}
	// A success resets the count of consecutive failures.
	if !acq(b) {
		t.Fatal("acquire refused")
	}
	b.done(true)
	fail()
	fail()
	fail()
	if !b.Open() || acq(b) {
		t.Fatal("not open after 3 consecutive failures")
	}
	if got := b.retryIn(); got != time.Second {
		t.Fatalf("retryIn = %v, want 1s", got)
	}
	ft.t += 999 * time.Millisecond
	if acq(b) {
		t.Fatal("let a call through before the cool-down ended")
	}
	ft.t += time.Millisecond
	// Half-open: exactly one probe.
	if !acq(b) {
		t.Fatal("no probe after the cool-down")
	}
	if acq(b) {
		t.Fatal("a second call went through while the probe was in flight")
	}
	b.done(false) // the probe failed: open for another cool-down
	if acq(b) {
		t.Fatal("a failed probe did not reopen the breaker")
	}
	ft.t += time.Second
	if !acq(b) {
		t.Fatal("no probe after the second cool-down")
	}
	b.release(true) // the probe was not made: another caller may probe
	if !acq(b) {
		t.Fatal("a released probe was not given to the next caller")
	}
	b.done(true)
	if b.Open() || !acq(b) {
		t.Fatal("a successful probe did not close the breaker")
	}
	b.done(true)
	if b.fails.Load() != 0 {
		t.Fatal("failures not reset after closing")
	}
}

// TestBreakerOneProbe: in half-open state exactly one probe is in flight.
// A call acquired while the breaker was still closed and abandoned later
// (its caller's context ended) must not hand out a second probe.
func TestBreakerOneProbe(t *testing.T) {
	var ft fakeTime
	b := NewBreaker(2, time.Second)
	b.now = ft.now
	old, _ := b.acquire() // acquired while closed, still in flight
	if !old {
		t.Fatal("acquire refused while closed")
	}
	for range 2 {
		if !acq(b) {
			t.Fatal("acquire refused while closed")
		}
		b.done(false)
	}
	ft.t += time.Second
	ok, probe := b.acquire()
	if !ok || !probe {
		t.Fatalf("acquire after the cool-down = %v, %v; want the probe", ok, probe)
	}
	b.release(false) // the old call's caller gave up
	if ok, _ := b.acquire(); ok {
		t.Fatal("a second probe went through while the first was in flight")
	}
}

// TestBreakerConcurrent drives one breaker from many goroutines, under
// -race: every acquired call ends in exactly one done or release, refused
// calls touch nothing, and once calls succeed again the breaker closes.
func TestBreakerConcurrent(t *testing.T) {
	b := NewBreaker(3, 0) // no cool-down: every state is visited often
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ok, probe := b.acquire()
				if !ok {
					continue
				}
				switch (g + i) % 3 {
				case 0:
					b.done(true)
				case 1:
					b.done(false)
				default:
					b.release(probe)
				}
			}
		}()
	}
	wg.Wait()
	for range 10 { // a probe (or a closed breaker) lets a call through
		if ok, _ := b.acquire(); ok {
			b.done(true)
		}
	}
	if b.Open() || b.state.Load() != breakerClosed || b.probing {
		t.Fatalf("breaker not closed after successes: state %d, probing %v", b.state.Load(), b.probing)
	}
}

// acq reports whether b lets a call through.
func acq(b *Breaker) bool {
	ok, _ := b.acquire()
	return ok
}
