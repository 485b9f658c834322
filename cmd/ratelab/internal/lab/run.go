package lab

import (
	"fmt"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Event is a request and one algorithm's decision on it.
type Event struct {
	Request
	Allowed bool
	// Delay is the leaky bucket's queueing delay for an admitted request;
	// 0 for the other algorithms.
	Delay time.Duration
	// Spacing is, for the leaky bucket, the time between the starts of
	// the units of one request: a request of cost c starts its units at
	// Start(), Start()+Spacing, ..., Start()+(c−1)·Spacing. 0 (all units
	// start together) for the other algorithms.
	Spacing time.Duration
}

// Start returns when an admitted request starts: At + Delay.
func (e Event) Start() time.Duration { return e.At + e.Delay }

// Outcome is what one algorithm did with one shape.
type Outcome struct {
	Algo   Algorithm
	Events []Event // in decision order; nil when Algo.NA is set
	Stats  Stats
}

// ShapeResult holds every algorithm's Outcome for one shape.
type ShapeResult struct {
	Shape    Shape
	Offered  []Request // the requests sent, for shapes that are not Reactive
	Outcomes []Outcome // in the order of the algorithms
}

// Run sends shape's traffic through each algorithm on its own limiter and
// manual clock, and computes the statistics of each outcome against
// policy. It fails if a limiter rejects its configuration or if a shape
// that does not react to decisions sends nothing.
func Run(shape Shape, algos []Algorithm, policy Policy) (ShapeResult, error) {
	res := ShapeResult{Shape: shape}
	if !shape.Reactive {
		t := shape.New()
		for r, ok := t.Next(); ok; r, ok = t.Next() {
			res.Offered = append(res.Offered, r)
		}
		if len(res.Offered) == 0 {
			return ShapeResult{}, fmt.Errorf("shape %s sends no requests", shape.Name)
		}
	}
	for _, a := range algos {
		o := Outcome{Algo: a}
		if a.NA == "" {
			ev, err := runOne(shape, a)
			if err != nil {
				return ShapeResult{}, err
			}
			o.Events = ev
			o.Stats = Measure(ev, policy)
		}
		res.Outcomes = append(res.Outcomes, o)
	}
	return res, nil
}

func runOne(shape Shape, a Algorithm) ([]Event, error) {
	var spacing time.Duration
	if lb, ok := a.Policy.(hotlimit.LeakyBucket); ok {
		spacing = lb.Rate.Interval()
	}
	clk := hotlimit.NewManualClock()
	lim, err := newDecider(a.Policy, clk, shape.MaxKeys)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", a.Name, err)
	}
	defer lim.Close()
	t := shape.New()
	var ev []Event
	last := time.Duration(0)
	for r, ok := t.Next(); ok; r, ok = t.Next() {
		if r.At < last {
			return nil, fmt.Errorf("shape %s: request at %v after one at %v: requests must be in time order", shape.Name, r.At, last)
		}
		last = r.At
		clk.Set(r.At)
		d := lim.AllowN(r.Key, r.Cost)
		t.Observe(d)
		ev = append(ev, Event{Request: r, Allowed: d.Allowed, Delay: d.Delay, Spacing: spacing})
	}
	return ev, nil
}
