package admission

import (
	"context"
	"time"
)

// An Observer sees every decision a Pipeline's backend makes or fails to
// make, for metrics and traces: promlimit's and otellimit's observers
// time the backend and record the capacity left. Observe is called
// synchronously, on the request's goroutine, after the backend returned;
// it must be fast and safe for concurrent use, and must not keep ev.
type Observer interface {
	Observe(ctx context.Context, ev *Event)
}

// Event describes one decision of the backend, for an Observer. It holds
// no key and no identity: limit names only.
type Event struct {
	// Result is the request's Result: its Outcome, Decision, Err and
	// layers (Item gives each one's name and state).
	Result *Result
	// Group is the request's group.
	Group string
	// Limit is the group layer's limit, the first layer's, and Algorithm
	// its algorithm as Config.Limits gives it ("TokenBucket", ...).
	Limit, Algorithm string
	// Duration is how long the backend took to decide (a Redis round
	// trip included).
	Duration time.Duration
}

// observe reports the backend's decision on a request of group g, begun
// at began, to the observers.
func (p *Pipeline[R]) observe(ctx context.Context, res *Result, g *group[R], began time.Time) {
	if p.observers == nil {
		return
	}
	res.ev = Event{Result: res, Group: g.name, Limit: g.limit.name, Algorithm: g.limit.Algorithm.String(), Duration: time.Since(began)}
	for _, o := range p.observers {
		o.Observe(ctx, &res.ev)
	}
	res.ev.Result = nil
}
