package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// ErrBadCost is wrapped by admission.Event.Err when a Group's CostFunc priced a
// request below 0.
var ErrBadCost = errors.New("httplimit: CostFunc returned a negative cost")

// ErrNoCost is returned by a CostFromContext function for a request whose
// context carries no cost and that has no default.
var ErrNoCost = errors.New("httplimit: request context carries no cost")

// costKey is the context key of WithCost.
type costKey struct{}

// WithCost returns a copy of ctx that carries a request's cost, for a
// Group's CostFunc made by CostFromContext: an earlier middleware prices
// the request (a GraphQL complexity analysis, say) and hands the price on
// through the request's context.
func WithCost(ctx context.Context, cost int64) context.Context {
	return context.WithValue(ctx, costKey{}, cost)
}

// CostFromContext returns a CostFunc that reads the cost WithCost put in
// the request's context. A request without one costs def, or, for def
// below 0, is refused with ErrNoCost (use that when every request must
// have been priced first).
func CostFromContext(def int64) func(*http.Request) (int64, error) {
	return func(r *http.Request) (int64, error) {
		if c, ok := r.Context().Value(costKey{}).(int64); ok {
			return c, nil
		}
		if def < 0 {
			return 0, ErrNoCost
		}
		return def, nil
	}
}

// price returns the request's cost in group g: Cost, or CostFunc's.
func (g *groupState) price(r *http.Request) (int64, error) {
	if g.costFunc == nil {
		return g.cost, nil
	}
	c, err := g.costFunc(r)
	switch {
	case err != nil:
		return 0, fmt.Errorf("httplimit: group %q: CostFunc: %w", g.name, err)
	case c < 0:
		return 0, fmt.Errorf("%w: group %q, cost %d", ErrBadCost, g.name, c)
	}
	return c, nil
}
