package lab

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestDurationHelpers(t *testing.T) {
	const maxDur = time.Duration(math.MaxInt64)
	for _, c := range []struct {
		n    int64
		d    time.Duration
		want time.Duration
		ok   bool
	}{
		{0, maxDur, 0, true},
		{3, time.Hour, 3 * time.Hour, true},
		{1, maxDur, maxDur, true},
		{2, maxDur/2 + 1, 0, false},
		{1e11, 8760 * time.Hour, 0, false},
		{math.MaxInt64, math.MaxInt64, 0, false},
	} {
		if got, ok := mulDur(c.n, c.d); got != c.want || ok != c.ok {
			t.Errorf("mulDur(%d, %v) = %v, %v; want %v, %v", c.n, c.d, got, ok, c.want, c.ok)
		}
	}
	if addSat(maxDur-1, 2) != maxDur || addSat(1, 2) != 3 || addSat(maxDur, maxDur) != maxDur {
		t.Error("addSat does not saturate")
	}
	if shlSat(1, 62) != 1<<62 || shlSat(3, 62) != maxDur || shlSat(8760*time.Hour, 10) != maxDur || shlSat(time.Second, 10) != 1024*time.Second {
		t.Error("shlSat does not saturate")
	}
}

// The mean of long delays: their sum overflows a time.Duration.
func TestMeanDelayOfLongDelays(t *testing.T) {
	var evs []Event
	for i := range 600 {
		evs = append(evs, Event{Request: Request{At: time.Duration(i), Key: "k", Cost: 1}, Allowed: true, Delay: time.Duration(math.MaxInt64-599) + time.Duration(i)})
	}
	s := Measure(evs, Policy{Limit: 1000, Window: time.Hour})
	if want := time.Duration(math.MaxInt64 - 599 + 299); s.MeanDelay != want || s.MaxDelay != math.MaxInt64 {
		t.Errorf("MeanDelay %v, MaxDelay %v; want %v, %v", s.MeanDelay, s.MaxDelay, want, time.Duration(math.MaxInt64))
	}
	var sum durSum
	for _, d := range []time.Duration{5, 6, 8} {
		sum.add(d)
	}
	if sum.mean(3) != 6 {
		t.Errorf("mean of 5, 6, 8 = %v, want 6 (rounded down)", sum.mean(3))
	}
}

// The leaky bucket's max delay, Capacity intervals, is stated in its
// mapping even when the limiter rejects it; a product that overflows
// said so, and was printed as a negative duration.
func TestLeakyMappingDoesNotOverflow(t *testing.T) {
	as := Algorithms(Policy{Limit: 1, Window: 1000000 * time.Hour, LeakyCapacity: 10})
	if m := as[4].Mapping; !strings.Contains(m, "max delay beyond 292 years") || as[4].NA == "" {
		t.Errorf("leaky mapping %q, NA %q", m, as[4].NA)
	}
	if m := Algorithms(Policy{Limit: 1, Window: time.Hour, LeakyCapacity: 1e6})[4].Mapping; !strings.Contains(m, "max delay 1000000h0m0s") {
		t.Errorf("leaky mapping %q", m)
	}
}

func TestCheckShapes(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Limit: 100, Window: time.Minute}, ""},
		{Policy{Limit: 1, Window: 100}, ""},
		{Policy{Limit: MaxShapeLimit, Window: MaxShapeWindow}, ""},
		{Policy{Limit: 1, Window: 99}, "at least 100ns"},
		{Policy{Limit: 1, Window: MaxShapeWindow + 1}, "at most 8760h0m0s"},
		{Policy{Limit: MaxShapeLimit + 1, Window: time.Hour}, "at most 10000"},
		{Policy{Limit: 0, Window: time.Hour}, "must be positive"},
		{Policy{Limit: 1, Window: -time.Hour}, "must be positive"},
	} {
		err := CheckShapes(c.p)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckShapes(%+v) = %v, want %q", c.p, err, c.want)
		}
	}
	// At both ends of the bounds every shape sends requests, in time
	// order, and stays within time.Duration.
	for _, p := range []Policy{{Limit: 1, Window: MinShapeWindow}, {Limit: 3, Window: MaxShapeWindow, LeakyCapacity: 1000}, {Limit: 100, Window: MinShapeWindow}} {
		for _, s := range Shapes(Params{Policy: p, Keys: 10, MaxKeys: 5, Seed: 1}) {
			r, err := Run(s, Algorithms(p), p)
			if err != nil {
				t.Errorf("%+v %s: %v", p, s.Name, err)
				continue
			}
			for _, o := range r.Outcomes {
				if o.Algo.NA != "" {
					continue
				}
				if len(o.Events) == 0 {
					t.Errorf("%+v %s %s: no requests", p, s.Name, o.Algo.Name)
				}
				if st := o.Stats; st.MaxDelay < 0 || st.MeanDelay < 0 || st.MeanDelay > st.MaxDelay {
					t.Errorf("%+v %s %s: delays %v, %v", p, s.Name, o.Algo.Name, st.MaxDelay, st.MeanDelay)
				}
			}
		}
	}
}

// Capacity is the largest cost each algorithm can admit.
func TestAlgorithmCapacity(t *testing.T) {
	as := Algorithms(Policy{Limit: 100, Window: time.Minute, LeakyCapacity: 7})
	for i, want := range []int64{100, 100, 100, 100, 8} {
		a := as[i]
		if a.Capacity != want {
			t.Errorf("%s: Capacity %d, want %d", a.Name, a.Capacity, want)
		}
		l, err := newDecider(a.Policy, hotlimit.NewManualClock(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if d := l.AllowN("k", want+1); d.Allowed || d.RetryAfter != hotlimit.Never {
			t.Errorf("%s: cost Capacity+1 = %d: %+v, want denied for ever", a.Name, want+1, d)
		}
		if d := l.AllowN("k", want); !d.Allowed {
			t.Errorf("%s: cost Capacity = %d denied", a.Name, want)
		}
		l.Close()
	}
	if !Runnable(as) || Runnable(Algorithms(Policy{Limit: 1, Window: 1000000 * time.Hour})) {
		t.Error("Runnable")
	}
}

// A client that honours Retry-After on a very slow policy backs off by
// base·2^k past time.Duration's range: the wait saturates and ends the
// traffic, where it wrapped to a negative instant.
func TestBackoffSaturates(t *testing.T) {
	for seed := range uint64(20) {
		c := &client{key: "c", gap: time.Hour, end: math.MaxInt64, honour: true, base: MaxShapeWindow, rng: rand.New(rand.NewPCG(seed, 2))}
		last, ended := time.Duration(0), false
		for range 20 {
			r, ok := c.Next()
			if ended = !ok; ended {
				break
			}
			if r.At < last {
				t.Fatalf("seed %d: request at %v after %v", seed, r.At, last)
			}
			last = r.At
			c.Observe(hotlimit.Decision{RetryAfter: time.Second})
		}
		if !ended {
			t.Errorf("seed %d: the client kept trying past the end", seed)
		}
	}
}
