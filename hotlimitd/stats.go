package hotlimitd

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// Stats counts a Server's answers since it started. Every field only
// grows.
type Stats struct {
	// OK and OverLimit count requests answered with that overall code
	// (a request failed open is in FailedOpen only).
	OK, OverLimit uint64
	// FailedClosed counts requests the backend could not decide,
	// answered with codes.Unavailable; FailedOpen those answered OK
	// because of Options.FailOpen.
	FailedClosed, FailedOpen uint64
	// Invalid counts requests refused with codes.InvalidArgument (no
	// domain, no descriptors or too many).
	Invalid uint64
	// ShadowOverLimit counts shadow-mode descriptors that would have been
	// over their limit (answered OK), and ShadowErrors those the backend
	// could not decide (answered OK without a limit).
	ShadowOverLimit, ShadowErrors uint64
}

type counters struct {
	ok, overLimit, failedClosed, failedOpen, invalid, shadowOverLimit, shadowErrors atomic.Uint64
}

// Stats returns the server's counts.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{
		OK: c.ok.Load(), OverLimit: c.overLimit.Load(),
		FailedClosed: c.failedClosed.Load(), FailedOpen: c.failedOpen.Load(),
		Invalid:         c.invalid.Load(),
		ShadowOverLimit: c.shadowOverLimit.Load(), ShadowErrors: c.shadowErrors.Load(),
	}
}

// observed is an Event and the Result it points at, pooled.
type observed struct {
	res admission.Result
	ev  admission.Event
}

// observe hands the observers the enforced decision of a request: its
// outcome, the backend's Decision or error, how long the backend took,
// and, in Event.GroupLimit and Event.GroupAlgorithm, the binding descriptor's
// limit (the first one's when the backend does not say). A request that
// a rule refusing every hit refused (refuse: the backend only read the
// others) is OutcomeDeniedNever, its Decision not allowed. Event.Group is
// the request's domain, which the configuration has (a descriptor
// matched in it). No key is in the event.
func (s *Server) observe(ctx context.Context, c *call, domain string, d hotlimit.Decision, binding int, err error, refuse bool, took time.Duration) {
	o := s.events.Get().(*observed)
	// Only the exported fields are set (and cleared below): a Result
	// outside a Pipeline has no layers, and copying a whole one would
	// cost more than the decision.
	o.res.Decision, o.res.Err, o.res.Binding = d, err, -1
	switch {
	case err != nil && s.failOpen:
		o.res.Outcome = admission.OutcomeErrorAllowed
	case err != nil:
		o.res.Outcome = admission.OutcomeErrorDenied
	case refuse:
		o.res.Outcome = admission.OutcomeDeniedNever
		o.res.Decision.Allowed, o.res.Decision.RetryAfter = false, hotlimit.Never
	case d.Allowed:
		o.res.Outcome = admission.OutcomeAllowed
	case d.RetryAfter == hotlimit.Never:
		o.res.Outcome = admission.OutcomeDeniedNever
	default:
		o.res.Outcome = admission.OutcomeDenied
	}
	j := binding
	if j < 0 || j >= len(c.layers) {
		j = 0
	}
	alg := c.states[j].Policy.Algorithm
	if err != nil || alg == 0 {
		alg = c.algorithm(j)
	}
	o.ev = admission.Event{Result: &o.res, Group: domain, GroupLimit: c.layers[j].Limit, GroupAlgorithm: alg.String(), Duration: took}
	for _, ob := range s.observers {
		ob.Observe(ctx, &o.ev)
	}
	o.res.Err, o.ev = nil, admission.Event{}
	s.events.Put(o)
}

// algorithm returns the algorithm of layer j's configured policy.
func (c *call) algorithm(j int) hotlimit.Algorithm {
	for i, k := range c.layer {
		if k == j {
			return algorithmOf(c.lims[i].Policy)
		}
	}
	return 0
}

// algorithmOf returns p's algorithm, as hotlimit.Describe reports it, from
// its type (hotlimit has one algorithm per policy type): Describe builds
// the policy's parameters, an allocation per layer and decision when the
// backend does not report the policy (redislimit).
func algorithmOf(p hotlimit.Policy) hotlimit.Algorithm {
	switch p.(type) {
	case hotlimit.TokenBucket:
		return hotlimit.AlgorithmTokenBucket
	case hotlimit.LeakyBucket:
		return hotlimit.AlgorithmLeakyBucket
	case hotlimit.FixedWindow:
		return hotlimit.AlgorithmFixedWindow
	case hotlimit.SlidingWindow:
		return hotlimit.AlgorithmSlidingWindow
	case hotlimit.SlidingLog:
		return hotlimit.AlgorithmSlidingLog
	}
	pi, _ := hotlimit.Describe(p)
	return pi.Algorithm
}
