package lab

import (
	"slices"
	"testing"
	"time"
)

// These tests check the facts the issue states, on ratelab's own results.

var testPolicies = []Policy{
	{Limit: 100, Window: time.Minute, LeakyCapacity: 10},
	{Limit: 10, Window: time.Second, LeakyCapacity: 0},
	{Limit: 7, Window: 250 * time.Millisecond, LeakyCapacity: 3},
}

// runAll runs every built-in shape for p and returns the results by name.
func runAll(t *testing.T, p Policy) map[string]ShapeResult {
	t.Helper()
	out := map[string]ShapeResult{}
	for _, s := range Shapes(Params{Policy: p, Keys: 300, MaxKeys: 50, Seed: 7}) {
		r, err := Run(s, Algorithms(p), p)
		if err != nil {
			t.Fatalf("%v: %s: %v", p, s.Name, err)
		}
		out[s.Name] = r
	}
	return out
}

func outcome(t *testing.T, r ShapeResult, algo string) Outcome {
	t.Helper()
	for _, o := range r.Outcomes {
		if o.Algo.Name == algo {
			if o.Algo.NA != "" {
				t.Fatalf("%s is n/a: %s", algo, o.Algo.NA)
			}
			return o
		}
	}
	t.Fatalf("no outcome for %s", algo)
	return Outcome{}
}

// admittedStarts returns the sorted start times of key's admitted requests.
func admittedStarts(o Outcome, key string) []time.Duration {
	var ts []time.Duration
	for _, e := range o.Events {
		if e.Allowed && e.Key == key {
			ts = append(ts, e.Start())
		}
	}
	slices.Sort(ts)
	return ts
}

func TestFixedWindowAdmitsTwiceTheLimitAcrossABoundary(t *testing.T) {
	for _, p := range testPolicies {
		o := outcome(t, runAll(t, p)["boundary"], FixedWindow)
		if o.Stats.MaxInWindow != 2*p.Limit {
			t.Errorf("%v: fixed window admitted at most %d in one window's length, want 2×%d", p, o.Stats.MaxInWindow, p.Limit)
		}
		if o.Stats.OverLog != p.Limit {
			t.Errorf("%v: fixed window over the log by %d, want %d", p, o.Stats.OverLog, p.Limit)
		}
		// Every instant of the burst lies within one window's length.
		ts := admittedStarts(o, "boundary")
		if len(ts) != int(2*p.Limit) || ts[len(ts)-1]-ts[0] >= p.Window {
			t.Errorf("%v: %d admissions spanning %v", p, len(ts), ts[len(ts)-1]-ts[0])
		}
	}
}

func TestSlidingLogNeverExceedsTheLimit(t *testing.T) {
	for _, p := range testPolicies {
		for name, r := range runAll(t, p) {
			o := outcome(t, r, SlidingLog)
			if o.Stats.MaxInWindow > p.Limit || o.Stats.OverLog != 0 {
				t.Errorf("%v %s: sliding log admitted %d in one window (limit %d), %d over", p, name, o.Stats.MaxInWindow, p.Limit, o.Stats.OverLog)
			}
			if o.Stats.Admitted == 0 {
				t.Errorf("%v %s: sliding log admitted nothing", p, name)
			}
		}
	}
}

func TestTokenBucketAdmitsItsBurstThenTheRefillRate(t *testing.T) {
	for _, p := range testPolicies {
		o := outcome(t, runAll(t, p)["burst"], TokenBucket)
		T := p.Interval()
		burstEnd := p.Window + p.Window/100
		ts := admittedStarts(o, "burst")
		inBurst := int64(0)
		for _, at := range ts {
			if at < burstEnd {
				inBurst++
			}
		}
		// The full bucket, plus what refills during the burst.
		want := p.Limit + int64((burstEnd-1-p.Window)/T)
		if inBurst != want {
			t.Errorf("%v: %d admitted during the burst, want burst %d + refill = %d", p, inBurst, p.Limit, want)
		}
		// After the burst the bucket is empty and the demand twice the rate:
		// in any interval of length d it admits at most d/T + 1 (one token
		// refilled at each end), and about one every T overall.
		var after []time.Duration
		for _, at := range ts {
			if at >= burstEnd {
				after = append(after, at)
			}
		}
		if len(after) < 10 {
			t.Fatalf("%v: only %d admitted after the burst", p, len(after))
		}
		for i := range after {
			for j := i + 1; j < len(after); j++ {
				if d := after[j] - after[i]; int64(j-i) > int64(d/T)+1 {
					t.Fatalf("%v: %d admitted in %v after the burst, more than the refill rate allows (one per %v)", p, j-i+1, d, T)
				}
			}
		}
		span := after[len(after)-1] - after[0]
		if got, max := int64(len(after)-1), int64(span/T); got < max-1 || got > max+1 {
			// The demand comes every T/2, so each admission lags its token by under T/2.
			t.Errorf("%v: %d intervals admitted after the burst over %v, want about %d (one per %v)", p, got, span, max, T)
		}
	}
}

func TestLeakyBucketOutputNeverExceedsItsRate(t *testing.T) {
	for _, p := range testPolicies {
		T := p.Interval()
		for name, r := range runAll(t, p) {
			if r.Shape.MaxKeys > 0 {
				// Under WithMaxKeys a key's state can be evicted to make
				// room (when every sampled entry is as drained as it),
				// and an evicted key starts afresh: the rate holds only
				// for state the limiter keeps. TestFloodCannotResetTheAbuser
				// checks the case where the abuser is the most drained.
				continue
			}
			o := outcome(t, r, LeakyBucket)
			byKey := map[string][]time.Duration{}
			for _, e := range o.Events {
				if !e.Allowed {
					continue
				}
				if e.Delay < 0 || e.Delay > time.Duration(p.LeakyCapacity)*T {
					t.Errorf("%v %s: delay %v outside [0, %d×%v]", p, name, e.Delay, p.LeakyCapacity, T)
				}
				byKey[e.Key] = append(byKey[e.Key], e.Start())
			}
			for k, ts := range byKey {
				slices.Sort(ts)
				for i := 1; i < len(ts); i++ {
					if ts[i]-ts[i-1] < T {
						t.Fatalf("%v %s key %s: starts %v and %v are closer than %v", p, name, k, ts[i-1], ts[i], T)
					}
				}
			}
			if o.Stats.MaxInWindow > p.Limit { // starts ≥ T = ⌈W/N⌉ apart: at most N in [t, t+W)
				t.Errorf("%v %s: leaky bucket started %d in one window", p, name, o.Stats.MaxInWindow)
			}
		}
	}
}

func TestSteadyTrafficUnderTheLimitIsAllAdmitted(t *testing.T) {
	for _, p := range testPolicies {
		r := runAll(t, p)["steady"]
		for _, o := range r.Outcomes {
			if o.Stats.Denied != 0 || o.Stats.Admitted != int64(len(r.Offered)) {
				t.Errorf("%v: %s admitted %d, denied %d of %d steady requests", p, o.Algo.Name, o.Stats.Admitted, o.Stats.Denied, len(r.Offered))
			}
		}
	}
}

func TestFloodCannotResetTheAbuser(t *testing.T) {
	p := testPolicies[0]
	r := runAll(t, p)["flood"]
	for _, name := range []string{FixedWindow, SlidingLog, LeakyBucket} {
		o := outcome(t, r, name)
		if got := MaxInWindow(eventsOf(o, "abuser"), p.Window); got > p.Limit {
			t.Errorf("%s: the abuser got %d in one window under a flood of keys (limit %d)", name, got, p.Limit)
		}
	}
}

func eventsOf(o Outcome, key string) []Event {
	var ev []Event
	for _, e := range o.Events {
		if e.Allowed && e.Key == key {
			ev = append(ev, e)
		}
	}
	slices.SortStableFunc(ev, func(a, b Event) int { return compareDur(a.Start(), b.Start()) })
	return ev
}

func TestReactiveClients(t *testing.T) {
	p := testPolicies[0]
	res := runAll(t, p)
	ign := outcome(t, res["ignore-retry"], FixedWindow)
	hon := outcome(t, res["backoff"], FixedWindow)
	if ign.Stats.Denied < 5*hon.Stats.Denied || hon.Stats.Denied == 0 && ign.Stats.Denied == 0 {
		t.Errorf("a client ignoring Retry-After was denied %d times, one honouring it %d: want many more", ign.Stats.Denied, hon.Stats.Denied)
	}
	// Honouring Retry-After: after a denial, the next try is no earlier
	// than the RetryAfter the denial gave (checked through the token bucket,
	// whose RetryAfter is exact).
	tb := outcome(t, res["backoff"], TokenBucket)
	for i := 1; i < len(tb.Events); i++ {
		prev, cur := tb.Events[i-1], tb.Events[i]
		if !prev.Allowed && cur.At-prev.At < p.Interval()/2 {
			t.Fatalf("retry at %v only %v after a denial at %v", cur.At, cur.At-prev.At, prev.At)
		}
	}
}
