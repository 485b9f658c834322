package hotlimit_test

import (
	"fmt"
	"time"

	"github.com/hotlimit/hotlimit"
)

func Example() {
	clock := hotlimit.NewManualClock() // tests drive time; omit for the real clock
	lim, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2}, hotlimit.WithClock(clock))
	if err != nil {
		panic(err)
	}
	defer lim.Close()
	for i := 0; i < 3; i++ {
		d := lim.Allow("user:42")
		fmt.Println(d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(333_333_334 * time.Nanosecond)
	fmt.Println(lim.Allow("user:42").Allowed)
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 333.333334ms
	// true
}

func ExampleLeakyBucket() {
	clock := hotlimit.NewManualClock()
	lim, _ := hotlimit.New(hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 2}, hotlimit.WithClock(clock))
	defer lim.Close()
	for i := 0; i < 4; i++ {
		d := lim.Allow("worker")
		fmt.Printf("allowed=%v delay=%v\n", d.Allowed, d.Delay)
	}
	// Output:
	// allowed=true delay=0s
	// allowed=true delay=100ms
	// allowed=true delay=200ms
	// allowed=false delay=0s
}

func ExampleSlidingWindow() {
	clock := hotlimit.NewManualClock()
	lim, _ := hotlimit.New(hotlimit.SlidingWindow{Limit: 10, Window: time.Minute}, hotlimit.WithClock(clock))
	defer lim.Close()
	lim.AllowN("tenant:acme", 10)
	clock.Advance(90 * time.Second) // half-way through the next window
	d := lim.AllowN("tenant:acme", 0)
	fmt.Println(d.Remaining, d.ResetAfter)
	// Output:
	// 5 30s
}

func ExampleParseRate() {
	r, err := hotlimit.ParseRate("5/250ms")
	fmt.Println(r.N, r.Per, r.Interval(), err)
	// Output:
	// 5 250ms 50ms <nil>
}

func ExampleSlidingLog() {
	// Five login attempts in any 15 minutes, exactly.
	clock := hotlimit.NewManualClock()
	lim, _ := hotlimit.New(hotlimit.SlidingLog{Limit: 5, Window: 15 * time.Minute}, hotlimit.WithClock(clock))
	defer lim.Close()
	lim.AllowN("login:alice", 3)
	clock.Advance(10 * time.Minute)
	lim.AllowN("login:alice", 2)
	d := lim.Allow("login:alice")
	fmt.Println(d.Allowed, d.RetryAfter) // the first three expire 15 minutes after they were made
	// Output:
	// false 5m0s
}

func ExampleNewConcurrency() {
	exports, _ := hotlimit.NewConcurrency(2) // two exports in flight per tenant
	defer exports.Close()
	a, _ := exports.TryAcquire("tenant:acme")
	b, _ := exports.TryAcquire("tenant:acme")
	_, ok := exports.TryAcquire("tenant:acme")
	fmt.Println(ok, exports.InFlight("tenant:acme"))
	a.Release()
	a.Release() // a second release of the same permit does nothing
	fmt.Println(exports.InFlight("tenant:acme"))
	b.Release()
	// Output:
	// false 2
	// 1
}

func ExampleLimiter_SetPolicy() {
	clock := hotlimit.NewManualClock()
	lim, _ := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 10}, hotlimit.WithClock(clock))
	defer lim.Close()
	lim.AllowN("user:42", 6) // 600ms of debt
	// Halve the policy: the debt is kept as time, so 2 of the new 5 remain.
	if err := lim.SetPolicy(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(5), Burst: 5}); err != nil {
		panic(err)
	}
	fmt.Println(lim.AllowN("user:42", 0).Remaining)
	// Output:
	// 2
}

// A request admitted by the limiter whose work then does not happen (it
// fails validation) gives its units back through the Admission that
// AdmitN recorded. A Refund gives back at most once.
func ExampleLimiter_AdmitN() {
	clock := hotlimit.NewManualClock()
	lim, _ := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerMinute(3), Burst: 3}, hotlimit.WithClock(clock))
	defer lim.Close()
	var a hotlimit.Admission
	d := lim.AdmitN(&a, "user:42", 2)
	fmt.Println(d.Allowed, d.Remaining)
	fmt.Println(a.Refund(), lim.Check("user:42", 0).Remaining)
	fmt.Println(a.Refund(), lim.Check("user:42", 0).Remaining)
	// Output:
	// true 1
	// true 3
	// false 3
}
