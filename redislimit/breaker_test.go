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
	c := b.circuit("")
	fail := func() {
		t.Helper()
		if !acq(c) {
			t.Fatal("acquire refused while closed")
		}
		c.done(false, nil)
	}
	fail()
	fail()
	if b.Open() {
		t.Fatal("open after 2 of 3 failures")
	}
	// A success resets the count of consecutive failures.
	if !acq(c) {
		t.Fatal("acquire refused")
	}
	c.done(true, nil)
	fail()
	fail()
	fail()
	if !b.Open() || acq(c) {
		t.Fatal("not open after 3 consecutive failures")
	}
	if got := c.retryIn(); got != time.Second {
		t.Fatalf("retryIn = %v, want 1s", got)
	}
	ft.t += 999 * time.Millisecond
	if acq(c) {
		t.Fatal("let a call through before the cool-down ended")
	}
	ft.t += time.Millisecond
	// Half-open: exactly one probe.
	if !acq(c) {
		t.Fatal("no probe after the cool-down")
	}
	if acq(c) {
		t.Fatal("a second call went through while the probe was in flight")
	}
	c.done(false, nil) // the probe failed: open for another cool-down
	if acq(c) {
		t.Fatal("a failed probe did not reopen the breaker")
	}
	ft.t += time.Second
	if !acq(c) {
		t.Fatal("no probe after the second cool-down")
	}
	c.release(true) // the probe was not made: another caller may probe
	if !acq(c) {
		t.Fatal("a released probe was not given to the next caller")
	}
	c.done(true, nil)
	if b.Open() || !acq(c) {
		t.Fatal("a successful probe did not close the breaker")
	}
	c.done(true, nil)
	if c.fails.Load() != 0 {
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
	c := b.circuit("")
	old, _ := c.acquire(nil) // acquired while closed, still in flight
	if !old {
		t.Fatal("acquire refused while closed")
	}
	for range 2 {
		if !acq(c) {
			t.Fatal("acquire refused while closed")
		}
		c.done(false, nil)
	}
	ft.t += time.Second
	ok, probe := c.acquire(nil)
	if !ok || !probe {
		t.Fatalf("acquire after the cool-down = %v, %v; want the probe", ok, probe)
	}
	c.release(false) // the old call's caller gave up
	if ok, _ := c.acquire(nil); ok {
		t.Fatal("a second probe went through while the first was in flight")
	}
}

// TestBreakerConcurrent drives one breaker from many goroutines, under
// -race: every acquired call ends in exactly one done or release, refused
// calls touch nothing, and once calls succeed again the breaker closes.
func TestBreakerConcurrent(t *testing.T) {
	b := NewBreaker(3, 0) // no cool-down: every state is visited often
	c := b.circuit("")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ok, probe := c.acquire(nil)
				if !ok {
					continue
				}
				switch (g + i) % 3 {
				case 0:
					c.done(true, nil)
				case 1:
					c.done(false, nil)
				default:
					c.release(probe)
				}
			}
		}()
	}
	wg.Wait()
	for range 10 { // a probe (or a closed breaker) lets a call through
		if ok, _ := c.acquire(nil); ok {
			c.done(true, nil)
		}
	}
	if b.Open() || c.state.Load() != breakerClosed || c.probing {
		t.Fatalf("breaker not closed after successes: state %d, probing %v", c.state.Load(), c.probing)
	}
}

// acq reports whether c lets a call through.
func acq(c *circuit) bool {
	ok, _ := c.acquire(nil)
	return ok
}
