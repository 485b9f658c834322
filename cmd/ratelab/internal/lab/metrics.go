package lab

import (
	"slices"
	"time"
)

// Stats summarises one algorithm's outcome on one shape.
type Stats struct {
	Admitted int64 // requests admitted
	Denied   int64 // requests denied
	// MaxInWindow is the most units admitted to one key within any
	// interval [t, t+Window), counting each admitted unit at its start
	// time (At + Delay, and for the leaky bucket one interval later for
	// each further unit of a request: see Event.Spacing), maximised over
	// t and keys.
	MaxInWindow int64
	// OverLog is the number of admitted units that the exact sliding log
	// would deny if it saw only this algorithm's admitted units, at their
	// start times (as for MaxInWindow), in order. 0 means the admissions respect the
	// limit in every interval of the window's length.
	OverLog int64
	// MaxDelay and MeanDelay are the queueing delays of the admitted
	// requests (non-zero for the leaky bucket only).
	MaxDelay, MeanDelay time.Duration
}

// Measure computes the Stats of events under policy.
func Measure(events []Event, policy Policy) Stats {
	var s Stats
	var sumDelay durSum
	byKey := map[string][]Event{}
	var keys []string
	for _, e := range events {
		if !e.Allowed {
			s.Denied++
			continue
		}
		s.Admitted++
		sumDelay.add(e.Delay)
		s.MaxDelay = max(s.MaxDelay, e.Delay)
		if _, ok := byKey[e.Key]; !ok {
			keys = append(keys, e.Key)
		}
		byKey[e.Key] = appendUnits(byKey[e.Key], e)
	}
	if s.Admitted > 0 {
		s.MeanDelay = sumDelay.mean(s.Admitted)
	}
	for _, k := range keys {
		adm := byKey[k]
		slices.SortStableFunc(adm, func(a, b Event) int { return compareDur(a.Start(), b.Start()) })
		s.MaxInWindow = max(s.MaxInWindow, MaxInWindow(adm, policy.Window))
		s.OverLog += OverLog(adm, policy)
	}
	return s
}

// maxSpread bounds the units of one request that appendUnits spreads
// out; a costlier request (only with a huge -queue) is counted at
// maxSpread start times, the rest of its units with the last one, which
// can only overstate MaxInWindow and OverLog.
const maxSpread = 1 << 16

// appendUnits appends e to evs, split into one event per unit at its own
// start time when e.Spacing > 0 (the leaky bucket's units of a costly
// request start one interval apart).
func appendUnits(evs []Event, e Event) []Event {
	if e.Spacing <= 0 || e.Cost <= 1 {
		return append(evs, e)
	}
	n := min(e.Cost, maxSpread)
	for k := range n {
		u := e
		u.Cost = 1
		if k == n-1 {
			u.Cost = e.Cost - (n - 1)
		}
		u.Delay = e.Delay + time.Duration(k)*e.Spacing
		u.Spacing = 0
		evs = append(evs, u)
	}
	return evs
}

func compareDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// MaxInWindow returns the largest total cost of events whose start times
// lie within one interval [t, t+window), over all t. events must be sorted
// by Start. It is a two-pointer sweep: the best interval can be taken to
// begin at some event's start.
func MaxInWindow(events []Event, window time.Duration) int64 {
	var best, sum int64
	i := 0
	for _, e := range events {
		sum += e.Cost
		for e.Start()-events[i].Start() >= window {
			sum -= events[i].Cost
			i++
		}
		best = max(best, sum)
	}
	return best
}

// OverLog replays events (one key's admitted requests, sorted by Start)
// through an exact sliding log of policy.Limit per policy.Window, and
// returns the total cost of those it would deny: a request of cost c
// starting at t is admitted by the log iff the cost it admitted in
// (t−Window, t] plus c is at most Limit.
func OverLog(events []Event, policy Policy) int64 {
	var over, sum int64
	var kept []Event // admitted by the log, within the window
	for _, e := range events {
		for len(kept) > 0 && e.Start()-kept[0].Start() >= policy.Window {
			sum -= kept[0].Cost
			kept = kept[1:]
		}
		if sum+e.Cost > policy.Limit {
			over += e.Cost
			continue
		}
		sum += e.Cost
		kept = append(kept, e)
	}
	return over
}
