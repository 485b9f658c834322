// Package layeroracle decides a layered request the slow, obvious way, one
// layer at a time, for the differential tests of httplimit and grpclimit:
// what the transports answer must be what it says.
package layeroracle

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Layer is one limit a request is checked against: its own limiter (of
// the same policy as the transport's, on the same clock), one key in it,
// and the request's cost there.
type Layer struct {
	Name string
	Lim  *hotlimit.Limiter
	Cost int64
}

// Spec names a layer and its policy, for NewLayers.
type Spec struct {
	Name   string
	Policy hotlimit.Policy
}

// NewLayers returns a layer of cost 1 for each spec, on a limiter of its
// own driven by clock, without a sweeper. Close them with Close.
func NewLayers(clock hotlimit.Clock, specs ...Spec) ([]Layer, error) {
	var layers []Layer
	for _, sp := range specs {
		lim, err := hotlimit.New(sp.Policy, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
		if err != nil {
			Close(layers)
			return nil, err
		}
		layers = append(layers, Layer{Name: sp.Name, Lim: lim, Cost: 1})
	}
	return layers, nil
}

// Close closes the layers' limiters.
func Close(layers []Layer) {
	for _, l := range layers {
		l.Lim.Close()
	}
}

// State is a layer's state after a decision.
type State struct {
	Remaining int64
	// Next is Check(key, Remaining+1).RetryAfter, the wait for one unit
	// more; 0 when the layer is full.
	Next       time.Duration
	ResetAfter time.Duration
}

// Verdict is the oracle's decision of a request.
type Verdict struct {
	Allowed bool
	Never   bool          // a layer can never admit it
	Wait    time.Duration // when refused: the longest RetryAfter of the refusing layers
	States  []State
	// Binding is the layer the request's Decision describes, as
	// hotlimit.AllowLayersState defines it: when refused, the first of
	// the refusing layers with the longest wait; when admitted, the one
	// with the fewest requests of its cost left (the fewest units on a
	// tie, the first on another).
	Binding int
}

// Decide checks every layer, under key, at its cost; only if all admit
// does it admit the request on each. The states are each layer's after
// the decision: after its admission, or, when refused, as it was.
func Decide(key string, layers []Layer) Verdict {
	v := Verdict{Allowed: true, States: make([]State, len(layers)), Binding: -1}
	for i, l := range layers {
		if c := l.Lim.Check(key, l.Cost); !c.Allowed {
			if v.Allowed || c.RetryAfter > v.Wait {
				v.Binding = i
			}
			v.Allowed = false
			v.Never = v.Never || c.RetryAfter == hotlimit.Never
			v.Wait = max(v.Wait, c.RetryAfter)
		}
	}
	for i, l := range layers {
		var d hotlimit.Decision
		if v.Allowed {
			d = l.Lim.AllowN(key, l.Cost)
		} else {
			d = l.Lim.Check(key, 0)
		}
		v.States[i] = State{Remaining: d.Remaining, ResetAfter: d.ResetAfter}
		if d.Remaining < d.Limit {
			v.States[i].Next = l.Lim.Check(key, d.Remaining+1).RetryAfter
		}
		if v.Allowed {
			if b := v.Binding; b < 0 || requests(d.Remaining, l.Cost) < requests(v.States[b].Remaining, layers[b].Cost) ||
				requests(d.Remaining, l.Cost) == requests(v.States[b].Remaining, layers[b].Cost) && d.Remaining < v.States[b].Remaining {
				v.Binding = i
			}
		}
	}
	return v
}

// requests is how many requests of cost fit in remaining units.
func requests(remaining, cost int64) int64 {
	if cost <= 0 {
		return math.MaxInt64
	}
	return remaining / cost
}

// Algorithms are the policy types' names, as Algorithm.String gives them.
var Algorithms = []string{"TokenBucket", "LeakyBucket", "FixedWindow", "SlidingWindow", "SlidingLog"}

// Policy returns a small policy of the named algorithm, so that a short
// run crosses refusals, refills and window ends; variant 1 and 2 are two
// others for SetPolicy, variant 2 of capacity 1.
func Policy(algorithm string, variant int) hotlimit.Policy {
	return policies[algorithm][variant]
}

var policies = map[string][3]hotlimit.Policy{
	"TokenBucket": {
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: 2 * time.Second}, Burst: 4},
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 5, Per: 3 * time.Second}, Burst: 2},
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 3 * time.Second}, Burst: 1},
	},
	"LeakyBucket": {
		hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 2, Per: 3 * time.Second}, Capacity: 3},
		hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 5, Per: 2 * time.Second}, Capacity: 1},
		hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 1, Per: time.Second}, Capacity: 0},
	},
	"FixedWindow": {
		hotlimit.FixedWindow{Limit: 5, Window: 7 * time.Second},
		hotlimit.FixedWindow{Limit: 2, Window: 3 * time.Second},
		hotlimit.FixedWindow{Limit: 1, Window: 4 * time.Second},
	},
	"SlidingWindow": {
		hotlimit.SlidingWindow{Limit: 6, Window: 5 * time.Second},
		hotlimit.SlidingWindow{Limit: 3, Window: 9 * time.Second},
		hotlimit.SlidingWindow{Limit: 1, Window: 9 * time.Second},
	},
	"SlidingLog": {
		hotlimit.SlidingLog{Limit: 4, Window: 6 * time.Second},
		hotlimit.SlidingLog{Limit: 7, Window: 2 * time.Second},
		hotlimit.SlidingLog{Limit: 1, Window: 2 * time.Second},
	},
}

// Perturb is one step's change of the world: one step in three it
// advances clock by up to 3 s, and one step in every it gives a random
// layer another policy of its algorithm (Policy's variants), through set
// (the transport's backend: Classes().SetPolicy) and in the oracle alike.
func Perturb(rng *rand.Rand, clock *hotlimit.ManualClock, layers []Layer, every int, set func(limit string, p hotlimit.Policy) error) error {
	if rng.IntN(3) == 0 {
		clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
	}
	if rng.IntN(every) != 0 {
		return nil
	}
	l := layers[rng.IntN(len(layers))]
	np := Policy(l.Lim.Describe().Algorithm.String(), rng.IntN(3))
	if err := set(l.Name, np); err != nil {
		return err
	}
	return l.Lim.SetPolicy(np)
}

// CeilSeconds rounds d up to whole seconds.
func CeilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
