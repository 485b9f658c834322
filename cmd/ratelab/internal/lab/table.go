package lab

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WritePolicy writes how policy was mapped onto each algorithm.
func WritePolicy(w io.Writer, policy Policy, algos []Algorithm) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "policy: %d per %v per key, mapped onto each algorithm:\n", policy.Limit, policy.Window)
	for _, a := range algos {
		m := a.Mapping
		if a.NA != "" {
			m += ": " + a.NA
		}
		fmt.Fprintf(tw, "  %s\t%s\n", a.Name, m)
	}
	return tw.Flush()
}

// WriteTable writes one block per shape result: per algorithm, requests
// admitted and denied, the most admitted to one key in any interval of the
// window's length, the units the exact sliding log would have denied, and
// the queueing delay.
func WriteTable(w io.Writer, policy Policy, results []ShapeResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	win := policy.Window.String()
	for _, r := range results {
		fmt.Fprintf(tw, "\nshape %s: %s\n", r.Shape.Name, r.Shape.About)
		if !r.Shape.Reactive {
			fmt.Fprintf(tw, "  %s from %s over %v\n", plural(len(r.Offered), "request"), plural(countKeys(r.Offered), "key"), roundDur(r.Shape.Duration))
		} else {
			fmt.Fprintf(tw, "  the client reacts to decisions, so each algorithm sees its own requests, over %v\n", r.Shape.Duration)
		}
		fmt.Fprintf(tw, "%-14s\tadmitted\tdenied\tmost in any %s\tits bound\tover log\tdelay max\tdelay mean\t\n", "algorithm", win)
		var notes []string
		for _, o := range r.Outcomes {
			if o.Algo.NA != "" {
				fmt.Fprintf(tw, "%-14s\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\t\n", o.Algo.Name)
				notes = append(notes, fmt.Sprintf("  %s: %s\n", o.Algo.Name, o.Algo.NA))
				continue
			}
			s := o.Stats
			most := fmt.Sprint(s.MaxInWindow)
			if s.MaxInWindow > policy.Limit {
				most = fmt.Sprintf("%d (%.2f×)", s.MaxInWindow, float64(s.MaxInWindow)/float64(policy.Limit))
			}
			dmax, dmean := "-", "-"
			if o.Algo.Name == LeakyBucket {
				dmax, dmean = roundDur(s.MaxDelay), roundDur(s.MeanDelay)
			}
			fmt.Fprintf(tw, "%-14s\t%d\t%d\t%s\t%d\t%d\t%s\t%s\t\n", o.Algo.Name, s.Admitted, s.Denied, most, Bound(o.Algo, policy.Window), s.OverLog, dmax, dmean)
		}
		for _, n := range notes {
			fmt.Fprint(tw, n)
		}
	}
	fmt.Fprintf(tw, "\nmost in any %s: the most units admitted to one key whose start times fall in one interval [t, t+%s), any t (× the policy's %d).\n", win, win, policy.Limit)
	fmt.Fprintf(tw, "its bound: the most the algorithm itself can admit to one key in any %s (below); reaching it is the algorithm doing what it promises.\n", win)
	fmt.Fprintf(tw, "over log: admitted units that an exact sliding log (%d per %s) would deny, fed only this algorithm's admitted requests.\n", policy.Limit, win)
	fmt.Fprintln(tw, "delay: the leaky bucket's queueing delay (an admitted request starts at arrival + delay).")
	return tw.Flush()
}

// WriteGuide writes Guide's line for each algorithm, under a heading.
func WriteGuide(w io.Writer, policy Policy, algos []Algorithm) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s\n", guideHeading(policy.Window))
	for _, a := range algos {
		fmt.Fprintf(&b, "  %s\n", Guide(a, policy))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCosts writes each algorithm's measured cost.
func WriteCosts(w io.Writer, costs []Cost) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\ncost on this machine (varies run to run):")
	fmt.Fprintf(tw, "%-14s\tstate bytes/key\tns/decision\t\n", "algorithm")
	for _, c := range costs {
		if c.NA != "" {
			fmt.Fprintf(tw, "%-14s\tn/a\tn/a\t\n", c.Algo)
			continue
		}
		fmt.Fprintf(tw, "%-14s\t%.0f\t%.0f\t\n", c.Algo, c.BytesPerKey, c.NsPerDecision)
	}
	if len(costs) > 0 {
		c := costs[0]
		fmt.Fprintf(tw, "state bytes/key: heap growth (runtime.ReadMemStats once GC has settled) over %d keys, each sent %d unit requests.\n", c.Keys, c.Fill)
		fmt.Fprintf(tw, "ns/decision: a timed loop of %d AllowN calls over those keys, the manual clock advancing one interval per key per round.\n", c.Decisions)
	}
	return tw.Flush()
}

// plural returns "1 key", "2 keys".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func countKeys(reqs []Request) int {
	seen := map[string]bool{}
	for _, r := range reqs {
		seen[r.Key] = true
	}
	return len(seen)
}

// roundDur formats d rounded to a readable precision.
func roundDur(d time.Duration) string {
	switch {
	case d == 0:
		return "0s"
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return strings.TrimSpace(d.String())
}
