package admission

import (
	"context"
	"time"
)

// An Observer sees every decision a Pipeline's backend makes or fails to
// make, for metrics and traces: promlimit's and otellimit's observers
// time the backend and record the capacity left, and otellimit's can
// trace the backend's work in a span of its own. Both methods are called
// synchronously, on the request's goroutine; they must be fast and safe
// for concurrent use, and must not keep ev.
type Observer interface {
	// Begin is called right before the backend is asked, with the
	// request's Event as far as it is known: its Group, Limit and
	// Algorithm, and a Result whose layers (Layers, Item's Name and
	// Cost) and identity are set, but no decision yet. It returns the
	// context the backend decides under: ctx, or one carrying a span
	// that encloses the backend's own work. The observers' Begin are
	// called in Config.Observers order, each given the context the one
	// before returned.
	Begin(ctx context.Context, ev *Event) context.Context
	// Observe is called after the backend returned, with the context
	// the last Begin returned and the Event complete. (A service that
	// reports decisions it made without a Pipeline, as hotlimitd does,
	// calls Observe alone: there is no backend call of its own to
	// enclose.)
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

// begin tells the observers that the backend is about to decide res, a
// request of group g, and returns the context it decides under.
func (p *Pipeline[R]) begin(ctx context.Context, res *Result, g *group[R]) context.Context {
	res.ev = Event{Result: res, Group: g.name, Limit: g.limit.name, Algorithm: g.limit.Algorithm.String()}
	for _, o := range p.observers {
		ctx = o.Begin(ctx, &res.ev)
	}
	return ctx
}

// observe reports the backend's decision on res, begun at began, to the
// observers (after begin).
func (p *Pipeline[R]) observe(ctx context.Context, res *Result, began time.Time) {
	if p.observers == nil {
		return
	}
	res.ev.Duration = time.Since(began)
	for _, o := range p.observers {
		o.Observe(ctx, &res.ev)
	}
	res.ev.Result = nil
}
