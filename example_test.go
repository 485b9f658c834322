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
