package lab

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteTable(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	as := Algorithms(p)
	res := ShapeResult{
		Shape:   Shape{Name: "demo", About: "about it", Duration: 3 * time.Second},
		Offered: []Request{{0, "a", 1}, {1, "b", 1}},
		Outcomes: []Outcome{
			{Algo: as[1], Stats: Stats{Admitted: 20, Denied: 3, MaxInWindow: 20, OverLog: 10}},
			{Algo: Algorithm{Name: SlidingLog, NA: "n/a (limit too large)"}},
			{Algo: as[4], Stats: Stats{Admitted: 5, MaxInWindow: 5, MaxDelay: 1500 * time.Millisecond, MeanDelay: 333333333}},
		},
	}
	var b bytes.Buffer
	if err := WriteTable(&b, p, []ShapeResult{res}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"shape demo: about it\n",
		"  2 requests from 2 keys over 3s\n",
		"most in any 1s",
		"  sliding log: n/a (limit too large)\n",
		"(× the policy's 10)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	rows := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		rows[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, want := range []string{
		"algorithm admitted denied most in any 1s its bound over log delay max delay mean",
		"fixed window 20 3 20 (2.00×) 20 10 - -", // its bound: 2 × 10 across an edge
		"sliding log n/a n/a n/a n/a n/a n/a n/a",
		"leaky bucket 5 0 5 10 0 1.5s 333.33ms", // its bound: one start per 100ms

	} {
		if !rows[want] {
			t.Errorf("table lacks the row %q:\n%s", want, out)
		}
	}
	// The columns line up: each row is as wide as the header.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "algorithm ") {
			for _, r := range lines[i+1 : i+4] {
				if len([]rune(r)) != len([]rune(l)) {
					t.Errorf("row %q is not as wide as the header %q", r, l)
				}
			}
		}
	}
}

func TestWriteCosts(t *testing.T) {
	var b bytes.Buffer
	WriteCosts(&b, []Cost{
		{Algo: TokenBucket, BytesPerKey: 44.6, NsPerDecision: 87.2, Keys: 10, Fill: 5, Decisions: 99},
		{Algo: SlidingLog, NA: "n/a"},
	})
	out := b.String()
	for _, want := range []string{"token bucket", "45", "87", "over 10 keys, each sent 5 unit requests", "99 AllowN calls", "sliding log", "n/a"} {
		if !strings.Contains(out, want) {
			t.Errorf("costs lack %q:\n%s", want, out)
		}
	}
}

func TestRoundDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 5: "5ns", 1234567: "1.23ms", 5843333333: "5.84s", 90 * time.Second: "1m30s",
	} {
		if got := roundDur(d); got != want {
			t.Errorf("roundDur(%d) = %q, want %q", d, got, want)
		}
	}
}

// The guide names each algorithm's own bound, the number its red line
// in the overview stands at, and what it is for.
func TestWriteGuide(t *testing.T) {
	p := Policy{Limit: 100, Window: time.Minute, LeakyCapacity: 10}
	as := Algorithms(Policy{Limit: 2000, Window: time.Minute, LeakyCapacity: 10})
	var b bytes.Buffer
	if err := WriteGuide(&b, p, Algorithms(p)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  token bucket: up to 100 at once, then 100 per 1m0s; at most 199 in any 1m0s. Pick it for API quotas (the default).\n",
		"  fixed window: 100 per window aligned on the clock; up to 200 in any 1m0s across an edge.",
		"  sliding window: 100 per 1m0s, the previous window weighted by overlap; about 100 for spread traffic, 199 at worst.",
		"  sliding log: exactly 100 in any 1m0s;",
		"  leaky bucket: one start every 600ms, up to 10 waiting (delay at most 6s); at most 100 starts in any 1m0s.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("guide lacks %q:\n%s", want, b.String())
		}
	}
	// An algorithm that cannot run says why instead.
	if g := Guide(as[3], p); g != "sliding log: "+as[3].NA {
		t.Errorf("guide of an n/a sliding log = %q", g)
	}
}
