package lab

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hotlimit/hotlimit"
)

// Request is one request of a traffic shape: at instant At (since the
// start of the run), Key asks for Cost units.
type Request struct {
	At   time.Duration
	Key  string
	Cost int64
}

// Traffic produces the requests of one run, in non-decreasing order of
// At. Next and Observe alternate: after each request that Next returns,
// the runner calls Observe with the limiter's decision on it, so a client
// can react (retry, back off).
type Traffic interface {
	// Next returns the next request; ok is false when the traffic ends.
	Next() (r Request, ok bool)
	// Observe reports the decision on the request Next returned last.
	Observe(d hotlimit.Decision)
}

// Params configures the built-in shapes.
type Params struct {
	Policy  Policy
	Keys    int    // distinct keys for the zipf and flood shapes
	MaxKeys int    // the limiter's WithMaxKeys bound in the flood shape
	Seed    uint64 // seeds every random choice
}

// Shape is a named traffic pattern.
type Shape struct {
	Name  string
	About string
	// Reactive reports whether the traffic depends on the decisions, so
	// that each algorithm sees different requests.
	Reactive bool
	// MaxKeys, when > 0, bounds the limiter with hotlimit.WithMaxKeys.
	MaxKeys int
	// Duration is how long the shape's traffic lasts.
	Duration time.Duration
	// New returns a fresh Traffic; every call yields the same requests for
	// the same decisions.
	New func() Traffic
}

// Bounds of the policies the built-in shapes can run (CheckShapes).
const (
	// MaxShapeLimit bounds the limit: the shapes' request counts grow
	// with it (the zipf shape sends 30×Limit requests).
	MaxShapeLimit = 10_000
	// MaxShapeWindow bounds the window: the shapes last three windows,
	// and a client's backoff and the leaky bucket's delays reach further.
	MaxShapeWindow = 365 * 24 * time.Hour
	// MinShapeWindow bounds the window from below: the burst and boundary
	// shapes send a whole quota within 1% of a window, on a nanosecond
	// clock.
	MinShapeWindow = 100 * time.Nanosecond
)

// CheckShapes reports why the built-in shapes cannot run p (nil if they
// can): its limit or window is outside the bounds above. A
// trace has no such bounds.
func CheckShapes(p Policy) error {
	switch {
	case p.Limit < 1 || p.Window < 1:
		return fmt.Errorf("the limit and window must be positive, got %d per %v", p.Limit, p.Window)
	case p.Limit > MaxShapeLimit:
		return fmt.Errorf("the built-in shapes need a limit of at most %d (their traffic grows with it)", MaxShapeLimit)
	case p.Window > MaxShapeWindow:
		return fmt.Errorf("the built-in shapes need a window of at most %v (a year; they last three windows)", MaxShapeWindow)
	case p.Window < MinShapeWindow:
		return fmt.Errorf("the built-in shapes need a window of at least %v (they send a whole quota within 1%% of a window, on a nanosecond clock)", MinShapeWindow)
	}
	return nil
}

// Shapes returns the built-in shapes for p, in a fixed order. Each lasts
// three windows of the policy. p.Policy must pass CheckShapes.
func Shapes(p Params) []Shape {
	W, L := p.Policy.Window, p.Policy.Limit
	span := 3 * W
	return []Shape{
		{
			Name: "steady", Duration: span,
			About: "one key at 80% of the limit, evenly spaced: every algorithm should admit all",
			New:   func() Traffic { return listOf(even("steady", 0, span, L*4, 5*W)) },
		},
		{
			Name: "burst", Duration: span,
			About: "one key idle for a window, then 2×limit requests within 1% of a window, then 2× the rate",
			New: func() Traffic {
				r := even("burst", W, W+W/100, 2*L, W/100)
				r = append(r, even("burst", W+W/100, span, 2*L, W)...)
				return listOf(r)
			},
		},
		{
			Name: "boundary", Duration: span,
			About: "the boundary attack: a full quota in the last 1% before a window edge, another in the first 1% after it",
			New: func() Traffic {
				r := even("boundary", W-W/100, W, L, W/100)
				return listOf(append(r, even("boundary", W, W+W/100, L, W/100)...))
			},
		},
		{
			Name: "ignore-retry", Duration: span, Reactive: true,
			About: fmt.Sprintf("one client wanting 2× the rate that ignores Retry-After: a denied request is retried %v later", max(W/time.Duration(2*L)/5, 1)),
			New:   func() Traffic { return &client{key: "client", gap: max(W/time.Duration(2*L), 1), end: span} },
		},
		{
			Name: "backoff", Duration: span, Reactive: true,
			About: "the same client honouring Retry-After, with exponential backoff and up to 50% jitter",
			New: func() Traffic {
				return &client{key: "client", gap: max(W/time.Duration(2*L), 1), end: span, honour: true,
					base: p.Policy.Interval(), rng: rand.New(rand.NewPCG(p.Seed, 2))}
			},
		},
		{
			Name: "zipf", Duration: span,
			About: fmt.Sprintf("%d keys with Zipf(1.1) popularity, 10×limit per window in all, Poisson arrivals", p.Keys),
			New:   func() Traffic { return listOf(zipf(p, span)) },
		},
		{
			Name: "flood", Duration: span, MaxKeys: p.MaxKeys,
			About: fmt.Sprintf("%d distinct one-off keys against WithMaxKeys(%d), with one abuser at 3× the rate inside it", p.Keys, p.MaxKeys),
			New: func() Traffic {
				r := even("abuser", 0, span, 9*L, 3*W) // 3× the rate
				for i, q := range even("", 0, span, int64(p.Keys), span) {
					q.Key = fmt.Sprintf("flood-%06d", i)
					r = append(r, q)
				}
				slices.SortStableFunc(r, func(a, b Request) int { return compareDur(a.At, b.At) }) // not int(a.At-b.At): it wraps where int is 32 bits
				return listOf(r)
			},
		},
	}
}

// even returns unit requests for key from from (inclusive) to to
// (exclusive), n per per, evenly spaced with exact integer instants.
func even(key string, from, to time.Duration, n int64, per time.Duration) []Request {
	var r []Request
	for i := int64(0); ; i++ {
		// Instant of the i-th request, without accumulating rounding.
		at := from + time.Duration(int64(per)/n*i+int64(per)%n*i/n)
		if at >= to || n <= 0 {
			return r
		}
		r = append(r, Request{At: at, Key: key, Cost: 1})
	}
}

// zipf returns Poisson arrivals at 10×Limit per Window in all, spread over
// p.Keys keys by Zipf(s = 1.1) popularity.
func zipf(p Params, span time.Duration) []Request {
	rng := rand.New(rand.NewPCG(p.Seed, 1))
	z := rand.NewZipf(rng, 1.1, 1, uint64(max(p.Keys, 1)-1))
	mean := float64(p.Policy.Window) / float64(10*p.Policy.Limit)
	var r []Request
	// Sum the gaps in float64: the mean gap can be under 1 ns (a fast
	// policy), and truncating each gap would make most of them 0.
	for at := rng.ExpFloat64() * mean; at < float64(span); at += rng.ExpFloat64() * mean {
		r = append(r, Request{At: time.Duration(at), Key: fmt.Sprintf("user%05d", z.Uint64()), Cost: 1})
	}
	return r
}

// list is a Traffic that replays fixed requests.
type list struct {
	reqs []Request
	i    int
}

func listOf(r []Request) *list { return &list{reqs: r} }

func (l *list) Next() (Request, bool) {
	if l.i >= len(l.reqs) {
		return Request{}, false
	}
	l.i++
	return l.reqs[l.i-1], true
}

func (l *list) Observe(hotlimit.Decision) {}

// client is one closed-loop client on one key: it wants a request every
// gap; a denied request is retried, after gap/5 when it ignores
// Retry-After, or (honour) after max(RetryAfter, base·2^failures) plus up
// to 50% jitter.
type client struct {
	key    string
	gap    time.Duration
	end    time.Duration
	honour bool
	base   time.Duration
	rng    *rand.Rand
	next   time.Duration
	fails  int
	done   bool
}

func (c *client) Next() (Request, bool) {
	if c.done || c.next >= c.end {
		return Request{}, false
	}
	return Request{At: c.next, Key: c.key, Cost: 1}, true
}

func (c *client) Observe(d hotlimit.Decision) {
	switch {
	case d.Allowed:
		c.fails = 0
		c.next += c.gap
	case !c.honour:
		c.next += max(c.gap/5, 1)
	case d.RetryAfter == hotlimit.Never:
		c.done = true // it can never pass: give up
	default:
		// Saturating: base·2^10 and a long RetryAfter can exceed a
		// Duration; a wait past the end ends the traffic.
		wait := max(d.RetryAfter, shlSat(c.base, min(c.fails, 10)))
		wait = addSat(wait, time.Duration(c.rng.Int64N(int64(wait)/2+1)))
		c.fails++
		c.next = addSat(c.next, wait)
	}
}
