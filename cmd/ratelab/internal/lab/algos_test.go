package lab

import (
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestAlgorithms(t *testing.T) {
	p := Policy{Limit: 100, Window: time.Minute, LeakyCapacity: 7}
	as := Algorithms(p)
	names := []string{TokenBucket, FixedWindow, SlidingWindow, SlidingLog, LeakyBucket}
	if len(as) != len(names) {
		t.Fatalf("%d algorithms", len(as))
	}
	for i, a := range as {
		if a.Name != names[i] || a.NA != "" || a.Mapping == "" {
			t.Errorf("algorithm %d = %+v, want %s", i, a, names[i])
		}
	}
	if tb := as[0].Policy.(hotlimit.TokenBucket); tb.Burst != 100 || tb.Rate != hotlimit.PerMinute(100) {
		t.Errorf("token bucket = %+v", tb)
	}
	if lb := as[4].Policy.(hotlimit.LeakyBucket); lb.Capacity != 7 || lb.Rate != hotlimit.PerMinute(100) {
		t.Errorf("leaky bucket = %+v", lb)
	}
	if !strings.Contains(as[4].Mapping, "max delay 4.2s") {
		t.Errorf("leaky mapping %q does not state the max delay", as[4].Mapping)
	}
}

func TestAlgorithmsNA(t *testing.T) {
	p := Policy{Limit: hotlimit.MaxLogLimit + 1, Window: time.Minute}
	as := Algorithms(p)
	if !strings.HasPrefix(as[3].NA, "n/a (limit too large") {
		t.Errorf("sliding log NA = %q", as[3].NA)
	}
	for i, a := range as {
		if i != 3 && a.NA != "" {
			t.Errorf("%s: NA %q", a.Name, a.NA)
		}
	}
	// A limit the sliding-window counter cannot pack is reported, not fatal.
	as = Algorithms(Policy{Limit: 1 << 22, Window: time.Hour})
	if !strings.Contains(as[2].NA, "SlidingWindow") {
		t.Errorf("sliding window NA = %q", as[2].NA)
	}
	r, err := Run(Shape{Name: "x", Duration: 1, New: func() Traffic { return listOf([]Request{{0, "k", 1}}) }}, as, p)
	if err != nil || r.Outcomes[2].Events != nil || r.Outcomes[0].Stats.Admitted != 1 {
		t.Errorf("Run with n/a algorithms: %v, %+v", err, r.Outcomes)
	}
}
