package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// A Target makes the callers of one run: NewCaller is called once per
// caller, before the run starts, with the caller's index.
type Target interface {
	NewCaller(i int) Caller
}

// A Caller sends one request at a time; Run never calls one Caller from
// two goroutines, so it may reuse its request message.
type Caller interface {
	// Call sends one request whose descriptors name keys (indexes into
	// the key space, len(keys) = Options.Descriptors) and reports whether
	// the service answered over the limit.
	Call(ctx context.Context, keys []int) (over bool, err error)
}

// Options says what load Run puts on a Target.
type Options struct {
	Callers     int           // concurrent callers, each with one request in flight (> 0)
	Requests    int64         // measured calls in all, answered or failed; 0: no cap (then Duration is required)
	Duration    time.Duration // measured time; 0: no cap (then Requests is required)
	Warmup      time.Duration // unmeasured time before, the same load (connections, keys, caches)
	Keys        int           // key space (> 0); each descriptor's key is uniform in [0, Keys)
	Descriptors int           // descriptors per request (> 0)
	Seed        uint64        // seeds the callers' key streams (caller i: PCG(Seed, i))
	// MaxErrors is how many failed calls (warmup included) the run
	// survives: a failed call is counted in Result.Errors, never as a
	// decision, and the caller goes on; one more ends the run with that
	// error. 0: the first failed call ends the run.
	MaxErrors int64
	// Phase, when not nil, is called with true just before the measured
	// part starts (every caller done with its warmup) and with false just
	// after its last request ends: to measure something else over exactly
	// that time (the service's CPU).
	Phase func(measuring bool)
}

func (o Options) validate() error {
	switch {
	case o.Callers <= 0:
		return fmt.Errorf("bench: Callers must be > 0, got %d", o.Callers)
	case o.Keys <= 0:
		return fmt.Errorf("bench: Keys must be > 0, got %d", o.Keys)
	case o.Descriptors <= 0:
		return fmt.Errorf("bench: Descriptors must be > 0, got %d", o.Descriptors)
	case o.Requests < 0 || o.Duration < 0 || o.Warmup < 0 || o.MaxErrors < 0:
		return errors.New("bench: Requests, Duration, Warmup and MaxErrors must be ≥ 0")
	case o.Requests == 0 && o.Duration == 0:
		return errors.New("bench: one of Requests and Duration must be set")
	}
	return nil
}

// Result is what one run measured.
type Result struct {
	Requests int64         // measured requests, each answered
	Over     int64         // of them, answered over the limit
	Errors   int64         // measured calls that failed (at most Options.MaxErrors)
	Elapsed  time.Duration // from the start of the measured part to the end of its last request
	// Latency holds every measured request's latency in microseconds.
	Latency *hdrhistogram.Histogram
}

// PerSecond returns measured requests per second of Elapsed.
func (r *Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Quantile returns the latency at quantile q (0.5 for the median).
func (r *Result) Quantile(q float64) time.Duration {
	return time.Duration(r.Latency.ValueAtQuantile(q*100)) * time.Microsecond
}

// newHistogram returns a histogram of 1 µs to 10 s at 3 significant digits.
func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
}

// Run puts the load o describes on t: a warmup, then the measured part,
// which ends when Requests calls have been made or Duration has passed
// (each caller stops after the call in flight then), whichever comes
// first. A failed call is never counted as a
// decision; the run ends with an error when more than MaxErrors calls fail.
func Run(ctx context.Context, t Target, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &run{o: o, ctx: ctx, cancel: cancel, ready: make(chan struct{}), results: make([]Result, o.Callers)}

	callers := make([]Caller, o.Callers)
	for i := range callers {
		callers[i] = t.NewCaller(i)
	}
	// Phases: every caller runs the warmup, meets the others at the start
	// line, then runs the measured part.
	r.left.Store(o.Requests)
	r.start.Add(o.Callers)
	r.done.Add(o.Callers)
	for i, c := range callers {
		go r.caller(i, c)
	}
	r.start.Wait()
	if o.Phase != nil {
		o.Phase(true)
	}
	r.t0 = time.Now()
	close(r.ready)
	r.done.Wait()
	elapsed := time.Since(r.t0)
	if o.Phase != nil {
		o.Phase(false)
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}

	total := &Result{Elapsed: elapsed, Latency: newHistogram()}
	for i := range r.results {
		total.Requests += r.results[i].Requests
		total.Over += r.results[i].Over
		total.Errors += r.results[i].Errors
		total.Latency.Merge(r.results[i].Latency)
	}
	return total, nil
}

// run is one Run's shared state.
type run struct {
	o      Options
	ctx    context.Context
	cancel context.CancelCauseFunc

	start   sync.WaitGroup // every caller done with its warmup
	ready   chan struct{}  // closed when the measured part starts, t0 set
	done    sync.WaitGroup // every caller done
	left    atomic.Int64   // measured requests not yet claimed, when Requests caps the run
	errs    atomic.Int64   // failed calls, warmup included
	t0      time.Time      // the measured part's start: written before ready is closed
	results []Result       // caller i's in results[i]
}

// failed counts err, a failed call of phase, and reports whether the run
// is over (this error, or another, ended it).
func (r *run) failed(err error, phase string) bool {
	if n := r.errs.Add(1); n > r.o.MaxErrors && r.ctx.Err() == nil {
		r.cancel(fmt.Errorf("%s: %d failed calls (at most %d allowed), the last: %w", phase, n, r.o.MaxErrors, err))
	}
	return r.ctx.Err() != nil
}

// caller is caller i's goroutine: its warmup, then its measured calls
// into r.results[i].
func (r *run) caller(i int, c Caller) {
	defer r.done.Done()
	o, ctx := r.o, r.ctx
	res := &r.results[i]
	res.Latency = newHistogram()
	rng := rand.New(rand.NewPCG(o.Seed, uint64(i)))
	keys := make([]int, o.Descriptors)
	draw := func() {
		for j := range keys {
			keys[j] = rng.IntN(o.Keys)
		}
	}
	// Warmup: the same calls, not recorded.
	for end := time.Now().Add(o.Warmup); time.Now().Before(end) && ctx.Err() == nil; {
		draw()
		if _, err := c.Call(ctx, keys); err != nil {
			r.failed(err, "warmup")
		}
	}
	r.start.Done()
	<-r.ready
	var deadline time.Time
	if o.Duration > 0 {
		deadline = r.t0.Add(o.Duration)
	}
	for ctx.Err() == nil {
		if o.Requests > 0 && r.left.Add(-1) < 0 {
			return
		}
		draw()
		s := time.Now()
		over, err := c.Call(ctx, keys)
		e := time.Now()
		if err != nil {
			res.Errors++
			if r.failed(err, "measured") {
				return
			}
		} else {
			res.Requests++
			if over {
				res.Over++
			}
			_ = res.Latency.RecordValue(max(1, int64(e.Sub(s)/time.Microsecond)))
		}
		if !deadline.IsZero() && !e.Before(deadline) {
			return
		}
	}
}
