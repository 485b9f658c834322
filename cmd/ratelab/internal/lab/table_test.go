package lab

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteTable(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	res := ShapeResult{
		Shape:   Shape{Name: "demo", About: "about it", Duration: 3 * time.Second},
		Offered: []Request{{0, "a", 1}, {1, "b", 1}},
		Outcomes: []Outcome{
			{Algo: Algorithm{Name: FixedWindow}, Stats: Stats{Admitted: 20, Denied: 3, MaxInWindow: 20, OverLog: 10}},
			{Algo: Algorithm{Name: SlidingLog, NA: "n/a (limit too large)"}},
			{Algo: Algorithm{Name: LeakyBucket}, Stats: Stats{Admitted: 5, MaxInWindow: 5, MaxDelay: 1500 * time.Millisecond, MeanDelay: 333333333}},
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
		"(limit 10)",
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
		"algorithm admitted denied most in any 1s over log delay max delay mean",
		"fixed window 20 3 20 (2.00×) 10 - -",
		"sliding log n/a n/a n/a n/a n/a n/a",
		"leaky bucket 5 0 5 0 1.5s 333.33ms",
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
