package redislimit

import (
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

func TestDenyCacheBounded(t *testing.T) {
	c := newDenyCache(64)
	var ft fakeTime
	c.now = ft.now
	for i := range 10_000 {
		c.put(string(rune('a'+i%26))+string(rune(i)), denial{until: time.Hour, cost: 1})
	}
	if n := c.len(); n > 64 {
		t.Fatalf("cache holds %d entries, bound 64", n)
	}
	c.put("k", denial{until: 10 * time.Second, resetAt: 20 * time.Second, cost: 2, rem: 1})
	if _, ok := c.get("k", 1, 0); ok {
		t.Fatal("a denial of cost 2 answered a request of cost 1")
	}
	if d, ok := c.get("k", 3, 5*time.Second); !ok || d.until != 10*time.Second {
		t.Fatalf("get cost 3 = %+v, %v; want the cached denial", d, ok)
	}
	if _, ok := c.get("k", 2, 10*time.Second); ok {
		t.Fatal("an expired denial answered")
	}
}

// acq reports whether b lets a call through.
func acq(b *Breaker) bool {
	ok, _ := b.acquire()
	return ok
}
