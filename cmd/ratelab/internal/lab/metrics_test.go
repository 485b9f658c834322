package lab

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func ev(at time.Duration, cost int64) Event {
	return Event{Request: Request{At: at, Key: "k", Cost: cost}, Allowed: true}
}

func TestMaxInWindowSteps(t *testing.T) {
	W := 10 * time.Second
	tests := []struct {
		name string
		ev   []Event
		want int64
	}{
		{"empty", nil, 0},
		{"one", []Event{ev(5, 3)}, 3},
		{"just inside", []Event{ev(0, 1), ev(W-1, 1)}, 2},
		{"window is half-open", []Event{ev(0, 1), ev(W, 1)}, 1},
		{"best later", []Event{ev(0, 1), ev(W, 2), ev(W+1, 2), ev(2*W, 1)}, 4},
		{"weighted", []Event{ev(0, 5), ev(1, 0), ev(2, 7)}, 12},
		{"delay counts", []Event{ev(0, 1), {Request: Request{At: 0, Cost: 1}, Allowed: true, Delay: W}}, 1},
	}
	for _, tt := range tests {
		if got := MaxInWindow(tt.ev, W); got != tt.want {
			t.Errorf("%s: MaxInWindow = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// bruteMax tries every window starting at an event.
func bruteMax(ev []Event, w time.Duration) int64 {
	var best int64
	for _, a := range ev {
		var sum int64
		for _, b := range ev {
			if b.Start() >= a.Start() && b.Start() < a.Start()+w {
				sum += b.Cost
			}
		}
		best = max(best, sum)
	}
	return best
}

// bruteOver admits greedily, recounting the whole window for each event.
func bruteOver(ev []Event, p Policy) int64 {
	var kept []Event
	var over int64
	for _, e := range ev {
		var sum int64
		for _, k := range kept {
			if e.Start()-k.Start() < p.Window {
				sum += k.Cost
			}
		}
		if sum+e.Cost > p.Limit {
			over += e.Cost
		} else {
			kept = append(kept, e)
		}
	}
	return over
}

func TestMetricsMatchBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		n := rng.IntN(40)
		var evs []Event
		for range n {
			evs = append(evs, ev(time.Duration(rng.IntN(100)), int64(rng.IntN(4))))
		}
		slices.SortStableFunc(evs, func(a, b Event) int { return compareDur(a.Start(), b.Start()) })
		w := time.Duration(1 + rng.IntN(30))
		p := Policy{Limit: int64(1 + rng.IntN(8)), Window: w}
		if got, want := MaxInWindow(evs, w), bruteMax(evs, w); got != want {
			t.Fatalf("MaxInWindow(%v, %v) = %d, want %d", evs, w, got, want)
		}
		if got, want := OverLog(evs, p), bruteOver(evs, p); got != want {
			t.Fatalf("OverLog(%v, %+v) = %d, want %d", evs, p, got, want)
		}
	}
}

func TestOverLog(t *testing.T) {
	p := Policy{Limit: 2, Window: 10}
	evs := []Event{ev(0, 1), ev(1, 1), ev(2, 1), ev(9, 1), ev(10, 1), ev(11, 1), ev(12, 1)}
	// Admitted by the log: 0, 1, 10, 11; denied: 2, 9, 12.
	if got := OverLog(evs, p); got != 3 {
		t.Errorf("OverLog = %d, want 3", got)
	}
}

func TestMeasure(t *testing.T) {
	p := Policy{Limit: 2, Window: 10}
	evs := []Event{
		ev(0, 1), ev(1, 1), ev(2, 1),
		{Request: Request{At: 3, Key: "k", Cost: 1}},
		{Request: Request{At: 4, Key: "other", Cost: 1}, Allowed: true, Delay: 6},
	}
	s := Measure(evs, p)
	want := Stats{Admitted: 4, Denied: 1, MaxInWindow: 3, OverLog: 1, MaxDelay: 6, MeanDelay: 1}
	if s != want {
		t.Errorf("Measure = %+v, want %+v", s, want)
	}
}

// The leaky bucket starts the c units of a request of cost c one interval
// apart (the first after Delay), so its output never exceeds its rate even
// with costs. Counting every unit at the first start overstated "most in
// any window" and "over log" on traces with costs.
func TestLeakyBucketUnitsOfACostlyRequestAreSpread(t *testing.T) {
	p := Policy{Limit: 100, Window: time.Minute, LeakyCapacity: 10}
	T := p.Interval() // 600ms
	// A cost-11 request every 11 intervals: exactly the rate, all admitted.
	var reqs []Request
	for at := time.Duration(0); at < 3*p.Window; at += 11 * T {
		reqs = append(reqs, Request{At: at, Key: "k", Cost: 11})
	}
	r, err := Run(TraceShape("t.csv", reqs), Algorithms(p), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range r.Outcomes {
		if o.Algo.Name != LeakyBucket {
			continue
		}
		s := o.Stats
		if s.Denied != 0 {
			t.Fatalf("leaky bucket denied %d of %d", s.Denied, len(reqs))
		}
		if s.MaxInWindow != p.Limit || s.OverLog != 0 {
			t.Errorf("leaky bucket at exactly its rate: most in a window %d (want %d), over log %d (want 0)", s.MaxInWindow, p.Limit, s.OverLog)
		}
	}
}
