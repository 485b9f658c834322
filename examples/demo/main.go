// Command demo runs two traffic shapes through each of hotlimit's five
// algorithms on a manual clock and prints what each admits. It is deterministic and
// takes no arguments: go run ./examples/demo
package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/hotlimit/hotlimit"
)

type algo struct {
	name   string
	policy hotlimit.Policy
}

// All five enforce "10 per second" in their own way.
var algos = []algo{
	{"token bucket (burst 10)", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 10}},
	{"leaky bucket (queue 9)", hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 9}},
	{"fixed window (10/1s)", hotlimit.FixedWindow{Limit: 10, Window: time.Second}},
	{"sliding window (10/1s)", hotlimit.SlidingWindow{Limit: 10, Window: time.Second}},
	{"sliding log (10/1s)", hotlimit.SlidingLog{Limit: 10, Window: time.Second}},
}

// shape yields request instants.
type shape struct {
	name, about string
	at          []time.Duration
}

func shapes() []shape {
	var boundary, steady []time.Duration
	// 20 requests in the last 50 ms of a window, 20 more in the first 50 ms
	// of the next: the fixed window's weak spot.
	for i := range 20 {
		boundary = append(boundary, 950*time.Millisecond+time.Duration(i)*2*time.Millisecond)
	}
	for i := range 20 {
		boundary = append(boundary, time.Second+time.Duration(i)*2*time.Millisecond)
	}
	// 40 requests per second for two seconds: four times the rate.
	for i := range 80 {
		steady = append(steady, time.Duration(i)*25*time.Millisecond)
	}
	return []shape{
		{"boundary", "40 requests within 100 ms around a window edge", boundary},
		{"overload", "40 req/s for 2 s against 10/s", steady},
	}
}

func main() {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, sh := range shapes() {
		fmt.Fprintf(w, "\nshape %q: %s\n", sh.name, sh.about)
		fmt.Fprintln(w, "algorithm\tadmitted\tdenied\tmost in any 1 s\tmax delay\t")
		for _, a := range algos {
			clock := hotlimit.NewManualClock()
			lim, err := hotlimit.New(a.policy, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			var admitted []time.Duration
			var maxDelay time.Duration
			for _, t := range sh.at {
				clock.Set(t)
				if d := lim.Allow("client"); d.Allowed {
					admitted = append(admitted, t+d.Delay)
					maxDelay = max(maxDelay, d.Delay)
				}
			}
			lim.Close()
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%v\t\n", a.name, len(admitted), len(sh.at)-len(admitted), mostInWindow(admitted, time.Second), maxDelay)
		}
	}
	w.Flush()
}

// mostInWindow returns the most instants of ts (sorted) in any half-open
// interval of length d.
func mostInWindow(ts []time.Duration, d time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i]-ts[j] >= d {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
