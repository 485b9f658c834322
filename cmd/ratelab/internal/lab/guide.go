package lab

import (
	"fmt"
	"time"
)

// Guide returns one line saying what a admits under policy, with its own
// bound (Bound) in any interval of the window's length, and which need it
// fits; for an algorithm that cannot run the policy, why. The overview
// chart and the terminal report both print it.
func Guide(a Algorithm, policy Policy) string {
	if a.NA != "" {
		return fmt.Sprintf("%s: %s", a.Name, a.NA)
	}
	w := policy.Window
	b := Bound(a, w)
	switch a.Name {
	case TokenBucket:
		return fmt.Sprintf("token bucket: up to %d at once, then %d per %v; at most %d in any %v. Pick it for API quotas (the default).",
			a.Capacity, policy.Limit, w, b, w)
	case FixedWindow:
		return fmt.Sprintf("fixed window: %d per window aligned on the clock; up to %d in any %v across an edge. Pick it for \"N per calendar minute or day\" quotas.",
			a.Capacity, b, w)
	case SlidingWindow:
		return fmt.Sprintf("sliding window: %d per %v, the previous window weighted by overlap; about %d for spread traffic, %d at worst. Pick it for high limits without the edge burst.",
			a.Capacity, w, a.Capacity, b)
	case SlidingLog:
		return fmt.Sprintf("sliding log: exactly %d in any %v; keeps one instant per admitted unit. Pick it for login attempts and small exact quotas.",
			b, w)
	case LeakyBucket:
		return fmt.Sprintf("leaky bucket: one start every %v, up to %d waiting (delay at most %s); at most %d starts in any %v. Pick it to smooth calls to a fragile backend.",
			policy.Interval(), a.Capacity-1, maxDelay(a.Capacity-1, policy.Interval()), b, w)
	}
	return fmt.Sprintf("%s: at most %d in any %v", a.Name, b, w)
}

// guideHeading introduces the Guide lines.
func guideHeading(w time.Duration) string {
	return fmt.Sprintf("which to pick (each algorithm's own bound on one key's units in any %v is its red line in the overview):", w)
}
