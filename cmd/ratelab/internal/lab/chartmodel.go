package lab

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// The charts are built as a model (Figure, Panel, Series) that the tests
// read, then drawn with gonum/plot (chart.go).

// SeriesKind says what a Series shows, and so how it is drawn.
type SeriesKind int

// The kinds of series.
const (
	Sent     SeriesKind = iota // requests sent: a grey dashed step line
	Admitted                   // requests admitted: a filled step line in the algorithm's colour
	Focus                      // admitted to the focus key alone: a black step line
	// Envelope is the algorithm's own bound in the panel's measure
	// (Bound): a red dashed line that its admitted series can reach,
	// never cross.
	Envelope
	// Reference is the policy's own number in the panel's units (N per
	// window, or its average rate per bucket): a thin black dotted line,
	// the same in every panel, to compare the algorithms against.
	Reference
)

// Series is one line of a panel: Y[b] is the value over bucket b, from
// b·Bucket to (b+1)·Bucket. Label names it; the figure's title explains
// the kinds (the panels have no legends, which would hide data).
type Series struct {
	Kind  SeriesKind
	Label string
	Y     []float64
}

// Panel is one chart of one algorithm on one shape.
type Panel struct {
	Title  string
	YLabel string
	Algo   int    // index of the algorithm, for its colour
	NA     string // why the algorithm did not run; no series then
	Series []Series
}

// Find returns the first series of kind k, or nil.
func (p *Panel) Find(k SeriesKind) *Series {
	for i := range p.Series {
		if p.Series[i].Kind == k {
			return &p.Series[i]
		}
	}
	return nil
}

// Figure is a grid of panels on one time axis: Rows[i][j].
type Figure struct {
	Title  string
	Rows   [][]Panel
	Bucket time.Duration // width of a bucket
	End    time.Duration // the time axis runs from 0 to End
	Window time.Duration // the policy's window, for the ticks
	// ShareRows gives each row one y scale; otherwise the whole figure
	// shares one.
	ShareRows bool
	// Grid marks the overview, drawn 3 inches a column and 1.9 a row;
	// other figures are 10 inches wide and 2 a row.
	Grid bool
	// Notes are lines of text under the grid, each in the colour of the
	// algorithm Algo (or black when Algo < 0).
	Notes []Note
}

// Note is a line of text under a figure.
type Note struct {
	Text string
	Algo int
}

// chartEnd returns when a shape's chart ends: its duration, or later if
// the leaky bucket starts a request after it.
func chartEnd(r ShapeResult) time.Duration {
	end := r.Shape.Duration
	for _, o := range r.Outcomes {
		for _, e := range o.Events {
			end = max(end, e.Start()+1)
		}
	}
	return end
}

// FocusKey returns the key a shape is about: the one sent the most units
// (the single client, the zipf shape's most popular key, the flood shape's
// abuser); on a tie, the first to reach that number.
func FocusKey(r ShapeResult) string {
	reqs := r.Offered
	if reqs == nil { // reactive: each algorithm saw its own requests
		for _, o := range r.Outcomes {
			if len(o.Events) > 0 {
				for _, e := range o.Events {
					reqs = append(reqs, e.Request)
				}
				break
			}
		}
	}
	units := map[string]int64{}
	var best string
	for _, q := range reqs {
		units[q.Key] += q.Cost
		if n := units[q.Key]; n > units[best] || best == "" {
			best = q.Key
		}
	}
	return best
}

// shortKey returns key as a chart prints it: whole up to n characters,
// else its first n−1 and "…" (a trace's key may be 64 KiB long).
func shortKey(key string, n int) string {
	if r := []rune(key); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return key
}

// keyCount returns the number of distinct keys of a shape's requests.
func keyCount(r ShapeResult) int {
	if r.Offered != nil {
		return countKeys(r.Offered)
	}
	return 1 // a reactive shape is one client
}

// ShapeFigure returns the model of one shape's chart: one panel per
// algorithm, stacked, each with the requests sent and admitted per
// bucket (all keys; admitted requests counted at their start time), the
// focus key's admitted requests when the shape has several keys, and the
// policy's average rate for one key in requests per bucket (a reference:
// every algorithm admits bursts above it, up to its own Bound). All
// panels share one y scale.
func ShapeFigure(r ShapeResult, policy Policy) Figure {
	end := chartEnd(r)
	bucket := chartBucket(policy.Window, end)
	nb := int((end + bucket - 1) / bucket)
	focus := ""
	if keyCount(r) > 1 {
		focus = FocusKey(r)
	}
	perBucket := float64(policy.Limit) * float64(bucket) / float64(policy.Window)
	key := ""
	if focus != "" {
		key = fmt.Sprintf("; black: admitted to %q", shortKey(focus, 24))
	}
	f := Figure{
		Title: fmt.Sprintf("shape %q, policy %d per %v per key: requests per %v bucket, all keys\n"+
			"grey dashed: sent; filled: admitted (leaky bucket: at start time)%s; black dotted: the policy's average rate for one key, %s",
			r.Shape.Name, policy.Limit, policy.Window, bucket, key, perBucketText(perBucket, bucket)),
		End: end, Bucket: bucket, Window: policy.Window,
	}
	for i, o := range r.Outcomes {
		p := Panel{Title: o.Algo.Name, Algo: i, NA: o.Algo.NA, YLabel: fmt.Sprintf("requests / %v", bucket)}
		if o.Algo.NA == "" {
			sent, adm, foc := make([]float64, nb), make([]float64, nb), make([]float64, nb)
			for _, e := range o.Events {
				sent[e.At/bucket]++
				if e.Allowed {
					adm[e.Start()/bucket]++
					if e.Key == focus {
						foc[e.Start()/bucket]++
					}
				}
			}
			label := "admitted"
			if o.Algo.Name == LeakyBucket {
				label = "admitted (at start time)"
			}
			p.Series = []Series{{Kind: Sent, Label: "sent", Y: sent}, {Kind: Admitted, Label: label, Y: adm}}
			if focus != "" {
				p.Series = append(p.Series, Series{Kind: Focus, Label: fmt.Sprintf("admitted to %q", shortKey(focus, 24)), Y: foc})
			}
			p.Series = append(p.Series, Series{Kind: Reference, Label: fmt.Sprintf("rate: %s per key", perBucketText(perBucket, bucket)), Y: constant(perBucket, nb)})
		}
		f.Rows = append(f.Rows, []Panel{p})
	}
	return f
}

// perBucketText formats the limit's rate per bucket: "5 per 3s".
func perBucketText(v float64, bucket time.Duration) string {
	return fmt.Sprintf("%.3g per %v", v, bucket)
}

func constant(v float64, n int) []float64 {
	y := make([]float64, n)
	for i := range y {
		y[i] = v
	}
	return y
}

// Overview returns the model of the overview: one row per shape, one
// column per algorithm. Each panel shows the focus key's units sent and
// admitted in the last Window (the highest point within each bucket),
// beside the algorithm's own Bound in that measure and the policy's Limit
// for reference: an admitted series that reaches its bound is the
// algorithm doing what it promises, and how far its bound sits above the
// policy's Limit is what it allows beyond "Limit per Window". Each row has
// its own y scale, shared by its panels. Its notes are Guide's line for
// each algorithm.
func Overview(results []ShapeResult, policy Policy) Figure {
	var end time.Duration
	for _, r := range results {
		end = max(end, chartEnd(r))
	}
	bucket := chartBucket(policy.Window, end)
	nb := int((end + bucket - 1) / bucket)
	f := Figure{
		Title: fmt.Sprintf("ratelab: policy %d per %v per key; every shape (rows) through every algorithm (columns)\n"+
			"units sent (grey dashed) and admitted (filled; leaky bucket at start time) to the shape's busiest key in the last %v\n"+
			"red dashed: the most the algorithm itself can admit in any %v (its bound); black dotted: the policy's %d\n"+
			"panel titles: units admitted of units sent, and the peak in any %v of the bound", policy.Limit, policy.Window, policy.Window, policy.Window, policy.Limit, policy.Window),
		End: end, Bucket: bucket, Window: policy.Window, ShareRows: true, Grid: true,
	}
	if len(results) > 0 {
		f.Notes = append(f.Notes, Note{Text: guideHeading(policy.Window), Algo: -1})
		for i, o := range results[0].Outcomes {
			f.Notes = append(f.Notes, Note{Text: Guide(o.Algo, policy), Algo: i})
		}
	}
	for _, r := range results {
		focus := FocusKey(r)
		var row []Panel
		for i, o := range r.Outcomes {
			p := Panel{Title: o.Algo.Name, Algo: i, NA: o.Algo.NA}
			if i == 0 {
				p.YLabel = r.Shape.Name
				if keyCount(r) > 1 {
					p.YLabel += fmt.Sprintf("\n(key %s)", shortKey(focus, 10))
				}
			}
			if o.Algo.NA == "" {
				var sent, adm []Event
				var nSent, nAdm int64
				for _, e := range o.Events {
					if e.Key != focus {
						continue
					}
					sent = append(sent, e)
					nSent += e.Cost
					if e.Allowed {
						adm = appendUnits(adm, e)
						nAdm += e.Cost
					}
				}
				sentY := Trailing(sent, func(e Event) time.Duration { return e.At }, policy.Window, bucket, nb)
				admY := Trailing(adm, Event.Start, policy.Window, bucket, nb)
				peak := slices.Max(append([]float64{0}, admY...))
				bound := Bound(o.Algo, policy.Window)
				p.Title = fmt.Sprintf("%s: %d/%d, peak %g of %d", o.Algo.Name, nAdm, nSent, peak, bound)
				p.Series = []Series{
					{Kind: Sent, Label: "sent", Y: sentY},
					{Kind: Admitted, Label: "admitted (at start time)", Y: admY},
					{Kind: Envelope, Label: fmt.Sprintf("its bound %d", bound), Y: constant(float64(bound), nb)},
					{Kind: Reference, Label: fmt.Sprintf("policy %d", policy.Limit), Y: constant(float64(policy.Limit), nb)},
				}
			}
			row = append(row, p)
		}
		f.Rows = append(f.Rows, row)
	}
	return f
}

// Trailing returns, for each of nb buckets of width bucket, the largest
// total cost of events whose time at(e) lies in (t−window, t], over the
// instants t of the bucket. It is the most in any window that a chart can
// show: its maximum over all buckets is MaxInWindow of the events.
func Trailing(events []Event, at func(Event) time.Duration, window, bucket time.Duration, nb int) []float64 {
	evs := slices.Clone(events)
	slices.SortStableFunc(evs, func(a, b Event) int { return compareDur(at(a), at(b)) })
	prefix := make([]int64, len(evs)+1)
	for i, e := range evs {
		prefix[i+1] = prefix[i] + e.Cost
	}
	// upto returns the total cost of the events at or before x.
	upto := func(x time.Duration) int64 {
		return prefix[sort.Search(len(evs), func(i int) bool { return at(evs[i]) > x })]
	}
	in := func(t time.Duration) int64 { return upto(t) - upto(t-window) }
	y := make([]float64, nb)
	j := 0
	for b := range nb {
		lo, hi := time.Duration(b)*bucket, time.Duration(b+1)*bucket
		best := in(lo)
		for ; j < len(evs) && at(evs[j]) < hi; j++ {
			if at(evs[j]) >= lo {
				best = max(best, in(at(evs[j])))
			}
		}
		y[b] = float64(best)
	}
	return y
}
