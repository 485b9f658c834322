package lab

import (
	"slices"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestEven(t *testing.T) {
	r := even("k", time.Second, 2*time.Second, 3, time.Second)
	want := []time.Duration{time.Second, time.Second + 333333333, time.Second + 666666666}
	if len(r) != len(want) {
		t.Fatalf("even: %d requests, want %d", len(r), len(want))
	}
	for i, q := range r {
		if q.At != want[i] || q.Key != "k" || q.Cost != 1 {
			t.Errorf("request %d = %+v, want at %v", i, q, want[i])
		}
	}
	if r := even("k", 0, time.Minute, 100, time.Minute); len(r) != 100 || r[99].At != 59400*time.Millisecond {
		t.Errorf("100 per minute: %d requests, last at %v", len(r), r[len(r)-1].At)
	}
}

func drain(tr Traffic) []Request {
	var out []Request
	for r, ok := tr.Next(); ok; r, ok = tr.Next() {
		out = append(out, r)
		tr.Observe(hotlimit.Decision{Allowed: true})
	}
	return out
}

func TestShapesAreOrderedAndDeterministic(t *testing.T) {
	p := Params{Policy: Policy{Limit: 100, Window: time.Minute, LeakyCapacity: 5}, Keys: 200, MaxKeys: 20, Seed: 3}
	names := map[string]bool{}
	for _, s := range Shapes(p) {
		if s.About == "" || names[s.Name] {
			t.Errorf("shape %q: empty description or duplicate name", s.Name)
		}
		names[s.Name] = true
		a, b := drain(s.New()), drain(s.New())
		if len(a) == 0 || !slices.Equal(a, b) {
			t.Errorf("%s: %d requests, not repeatable", s.Name, len(a))
		}
		for i := 1; i < len(a); i++ {
			if a[i].At < a[i-1].At {
				t.Fatalf("%s: request %d at %v before %v", s.Name, i, a[i].At, a[i-1].At)
			}
		}
		if last := a[len(a)-1].At; last >= s.Duration {
			t.Errorf("%s: request at %v past the shape's duration %v", s.Name, last, s.Duration)
		}
	}
	for _, n := range []string{"steady", "burst", "boundary", "ignore-retry", "backoff", "zipf", "flood"} {
		if !names[n] {
			t.Errorf("no shape %q", n)
		}
	}
}

func TestZipfSeedAndSkew(t *testing.T) {
	p := Params{Policy: Policy{Limit: 100, Window: time.Minute}, Keys: 1000, Seed: 1}
	a := zipf(p, 3*time.Minute)
	p.Seed = 2
	b := zipf(p, 3*time.Minute)
	if slices.Equal(a, b) {
		t.Error("zipf: seeds 1 and 2 gave the same traffic")
	}
	count := map[string]int{}
	for _, r := range a {
		count[r.Key]++
	}
	// Rank 0 is the most popular key: with s = 1.1 over 1000 keys it gets
	// roughly a sixth of the traffic; a uniform choice would give 0.1%.
	if top := count["user00000"]; top < len(a)/10 {
		t.Errorf("zipf: top key has %d of %d requests", top, len(a))
	}
	// 10×limit per window on average over 3 windows.
	if n := len(a); n < 2700 || n > 3300 {
		t.Errorf("zipf: %d requests, want about 3000", n)
	}
}

func TestClient(t *testing.T) {
	gap := 300 * time.Millisecond
	ign := &client{key: "c", gap: gap, end: time.Hour}
	ign.Observe(hotlimit.Decision{RetryAfter: time.Minute})
	if r, _ := ign.Next(); r.At != gap/5 {
		t.Errorf("ignoring client retried at %v, want %v", r.At, gap/5)
	}
	ign.Observe(hotlimit.Decision{Allowed: true})
	if r, _ := ign.Next(); r.At != gap/5+gap {
		t.Errorf("after an admission: next at %v, want %v", r.At, gap/5+gap)
	}

	hon := Shapes(Params{Policy: Policy{Limit: 100, Window: time.Minute}, Seed: 9})[4].New().(*client)
	var at time.Duration
	for i := range 12 {
		hon.Observe(hotlimit.Decision{RetryAfter: time.Second})
		r, ok := hon.Next()
		if !ok {
			break
		}
		wait := r.At - at
		floor := max(time.Second, hon.base<<min(i, 10))
		if wait < floor || wait > floor*3/2 {
			t.Errorf("denial %d: waited %v, want in [%v, %v]", i+1, wait, floor, floor*3/2)
		}
		at = r.At
	}
	hon.Observe(hotlimit.Decision{RetryAfter: hotlimit.Never})
	if _, ok := hon.Next(); ok {
		t.Error("a client told Never kept trying")
	}
}

// A fast policy (here one request per nanosecond) has a mean gap between
// zipf arrivals below 1 ns; truncating each gap to whole nanoseconds made
// almost every gap 0, and the shape grew without bound (out of memory for
// -policy 10000/10us).
func TestZipfFastPolicyKeepsItsRate(t *testing.T) {
	p := Params{Policy: Policy{Limit: 100, Window: 100 * time.Nanosecond}, Keys: 10, Seed: 1}
	r := zipf(p, 3*p.Policy.Window)
	if n := len(r); n < 2700 || n > 3300 {
		t.Errorf("zipf at 100 per 100ns: %d requests over 3 windows, want about 3000", n)
	}
	for i := 1; i < len(r); i++ {
		if r[i].At < r[i-1].At {
			t.Fatalf("request %d at %v before %v", i, r[i].At, r[i-1].At)
		}
	}
}
