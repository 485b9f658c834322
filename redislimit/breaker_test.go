package redislimit

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeTime is a settable monotonic clock for the two-tier cache.
type fakeTime struct{ t time.Duration }

func (f *fakeTime) now() time.Duration { return f.t }

// The breaker's circuits are gobreaker's, which read time.Now: the tests
// that need a cool-down to pass run in a synctest bubble, whose clock
// moves only when they sleep.

func TestBreakerStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(3, time.Second)
		c := b.circuit("")
		fail := func() {
			t.Helper()
			ok, tk := c.acquire(nil)
			if !ok {
				t.Fatal("acquire refused while closed")
			}
			c.done(tk, false, nil)
		}
		fail()
		fail()
		if b.open() {
			t.Fatal("open after 2 of 3 failures")
		}
		// A success resets the count of consecutive failures.
		ok, tk := c.acquire(nil)
		if !ok {
			t.Fatal("acquire refused")
		}
		c.done(tk, true, nil)
		fail()
		fail()
		fail()
		if !b.open() || acq(c) {
			t.Fatal("not open after 3 consecutive failures")
		}
		if got := c.retryIn(); got != time.Second {
			t.Fatalf("retryIn = %v, want 1s", got)
		}
		time.Sleep(999 * time.Millisecond)
		if acq(c) {
			t.Fatal("let a call through before the cool-down ended")
		}
		time.Sleep(time.Millisecond + time.Nanosecond)
		// Half-open: exactly one probe.
		ok, probe := c.acquire(nil)
		if !ok {
			t.Fatal("no probe after the cool-down")
		}
		if acq(c) {
			t.Fatal("a second call went through while the probe was in flight")
		}
		c.done(probe, false, nil) // the probe failed: open for another cool-down
		if acq(c) {
			t.Fatal("a failed probe did not reopen the breaker")
		}
		time.Sleep(time.Second + time.Nanosecond)
		ok, probe = c.acquire(nil)
		if !ok {
			t.Fatal("no probe after the second cool-down")
		}
		c.release(probe, nil) // the probe was not made: another caller may probe
		ok, probe = c.acquire(nil)
		if !ok {
			t.Fatal("a released probe was not given to the next caller")
		}
		c.done(probe, true, nil)
		ok, tk = c.acquire(nil)
		if b.open() || !ok {
			t.Fatal("a successful probe did not close the breaker")
		}
		c.done(tk, true, nil)
		if n := c.cb.Counts(); n.ConsecutiveFailures != 0 {
			t.Fatalf("failures not reset after closing: %+v", n)
		}
	})
}

// TestBreakerOneProbe: in half-open state exactly one probe is in flight.
// A call acquired while the breaker was still closed and abandoned later
// (its caller's context ended) must not hand out a second probe.
func TestBreakerOneProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(2, time.Second)
		c := b.circuit("")
		ok, old := c.acquire(nil) // acquired while closed, still in flight
		if !ok {
			t.Fatal("acquire refused while closed")
		}
		for range 2 {
			ok, tk := c.acquire(nil)
			if !ok {
				t.Fatal("acquire refused while closed")
			}
			c.done(tk, false, nil)
		}
		time.Sleep(time.Second + time.Nanosecond)
		if ok, _ := c.acquire(nil); !ok {
			t.Fatal("no probe after the cool-down")
		}
		c.release(old, nil) // the old call's caller gave up
		if acq(c) {
			t.Fatal("a second probe went through while the first was in flight")
		}
	})
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
				ok, tk := c.acquire(nil)
				if !ok {
					continue
				}
				switch (g + i) % 3 {
				case 0:
					c.done(tk, true, nil)
				case 1:
					c.done(tk, false, nil)
				default:
					c.release(tk, nil)
				}
			}
		}()
	}
	wg.Wait()
	for range 10 { // a probe (or a closed breaker) lets a call through
		if ok, tk := c.acquire(nil); ok {
			c.done(tk, true, nil)
		}
	}
	if b.open() || b.state("") != "closed" {
		t.Fatalf("breaker not closed after successes: %v", b.state(""))
	}
}

// acq reports whether c lets a call through; the call is then given back
// uncounted.
func acq(c *circuit) bool {
	ok, tk := c.acquire(nil)
	if ok {
		c.release(tk, nil)
	}
	return ok
}
