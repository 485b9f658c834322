package hotlimit_test

import (
	"sync"
	"testing"

	"github.com/hotlimit/hotlimit"
)

// newLimiter returns a Limiter for p with no background sweeper (opts,
// applied after, may start one), closed when the test ends. A
// configuration New rejects fails the test.
func newLimiter(t testing.TB, p hotlimit.Policy, opts ...hotlimit.Option) *hotlimit.Limiter {
	t.Helper()
	l, err := hotlimit.New(p, append([]hotlimit.Option{hotlimit.WithSweepInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// newManual is newLimiter on a new ManualClock, which it also returns.
func newManual(t testing.TB, p hotlimit.Policy, opts ...hotlimit.Option) (*hotlimit.Limiter, *hotlimit.ManualClock) {
	t.Helper()
	c := hotlimit.NewManualClock()
	return newLimiter(t, p, append([]hotlimit.Option{hotlimit.WithClock(c)}, opts...)...), c
}

// limiterMaker returns newLimiter for limiters that share clock c and the
// options opts.
func limiterMaker(t testing.TB, c hotlimit.Clock, opts ...hotlimit.Option) func(hotlimit.Policy) *hotlimit.Limiter {
	opts = append([]hotlimit.Option{hotlimit.WithClock(c)}, opts...)
	return func(p hotlimit.Policy) *hotlimit.Limiter {
		t.Helper()
		return newLimiter(t, p, opts...)
	}
}

// inParallel runs body(g) in n goroutines, g = 0, …, n−1, released
// together so that they contend, and returns when every one has returned.
func inParallel(n int, body func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			body(g)
		}()
	}
	close(start)
	wg.Wait()
}
