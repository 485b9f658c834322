package lab

import (
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func TestWriteChart(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	shape := Shapes(Params{Policy: p, Keys: 10, MaxKeys: 5, Seed: 1})[2]
	algos := Algorithms(p)
	algos[1].NA = "n/a (test)"
	r, err := Run(shape, algos, p)
	if err != nil {
		t.Fatal(err)
	}
	path := ChartPath(t.TempDir(), shape.Name)
	if filepath.Base(path) != "ratelab-boundary.png" {
		t.Errorf("ChartPath = %s", path)
	}
	if err := WriteChart(path, r, p); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 5*150 {
		t.Errorf("chart is %v: too small for five panels", b)
	}
	if err := WriteChart(filepath.Join(t.TempDir(), "missing", "x.png"), r, p); err == nil {
		t.Error("WriteChart into a missing folder: no error")
	}
}

func TestTimeUnitAndTicks(t *testing.T) {
	for d, want := range map[time.Duration]string{
		3 * time.Minute: "s", 30 * time.Minute: "min", 3 * 24 * time.Hour: "h", 750 * time.Millisecond: "ms", 3 * time.Millisecond: "µs",
	} {
		if _, got := timeUnit(d); got != want {
			t.Errorf("timeUnit(%v) = %s, want %s", d, got, want)
		}
	}
	ticks := windowTicks(time.Minute, time.Second).Ticks(0, 185)
	var vals []float64
	for _, tk := range ticks {
		vals = append(vals, tk.Value)
	}
	if len(vals) != 4 || vals[0] != 0 || vals[3] != 180 {
		t.Errorf("ticks for 3 one-minute windows in seconds = %v", vals)
	}
	if n := len(windowTicks(time.Second, time.Second).Ticks(0, 1000)); n > 13 || n < 5 {
		t.Errorf("%d ticks over 1000 windows", n)
	}
}

// A trace that spans much longer than its policy's window (a week of
// access log against 10 per second) must not get a bucket per 50 ms: 12
// million buckets per series ran out of memory and drew nothing legible.
func TestChartBucketsAreBounded(t *testing.T) {
	for _, c := range []struct{ window, end time.Duration }{
		{time.Minute, 3 * time.Minute},
		{time.Second, 7 * 24 * time.Hour},
		{time.Nanosecond, 100 * 365 * 24 * time.Hour},
		{time.Hour, time.Nanosecond},
	} {
		b := chartBucket(c.window, c.end)
		if b < 1 || b < c.window/Buckets {
			t.Errorf("chartBucket(%v, %v) = %v: finer than window/%d", c.window, c.end, b, Buckets)
		}
		if n := (c.end + b - 1) / b; n > MaxChartBuckets {
			t.Errorf("chartBucket(%v, %v) = %v: %d buckets, more than %d", c.window, c.end, b, n, MaxChartBuckets)
		}
	}
	if b := chartBucket(time.Minute, 3*time.Minute); b != 3*time.Second {
		t.Errorf("built-in shapes: bucket %v, want window/%d = 3s", b, Buckets)
	}
	// End to end: a week-long trace at 10 per second charts at once.
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	reqs := []Request{{0, "a", 1}, {7 * 24 * time.Hour, "a", 1}}
	r, err := Run(TraceShape("week.csv", reqs), Algorithms(p), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteChart(filepath.Join(t.TempDir(), "x.png"), r, p); err != nil {
		t.Fatal(err)
	}
}

// runShapes runs every built-in shape for p on every algorithm, in order.
func runShapes(t *testing.T, p Policy) []ShapeResult {
	t.Helper()
	var rs []ShapeResult
	for _, s := range Shapes(Params{Policy: p, Keys: 30, MaxKeys: 10, Seed: 1}) {
		r, err := Run(s, Algorithms(p), p)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

// The overview is one PNG, a grid of shapes × algorithms, with the limit
// drawn in red.
func TestWriteOverview(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	rs := runShapes(t, p)
	path := OverviewPath(t.TempDir())
	if filepath.Base(path) != "ratelab-overview.png" {
		t.Errorf("OverviewPath = %s", path)
	}
	if err := WriteOverview(path, rs, p); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	// 3 inches per column and 1.9 per row, at 96 pixels per inch, a title
	// of four lines and six lines of notes.
	b := img.Bounds()
	grid := 7 * 19 * 96 / 10
	if b.Dx() != 5*3*96 || b.Dy() < grid+150 || b.Dy() > grid+350 {
		t.Errorf("overview is %dx%d, want 1440 wide and about %d high (7 rows, title and notes)", b.Dx(), b.Dy(), grid+250)
	}
	// count returns the pixels of colour c in rows [y0, y1).
	count := func(c color.RGBA, y0, y1 int) int {
		n := 0
		for y := y0; y < y1; y++ {
			for x := b.Min.X; x < b.Max.X; x++ {
				if r, g, bl, _ := img.At(x, y).RGBA(); r>>8 == uint32(c.R) && g>>8 == uint32(c.G) && bl>>8 == uint32(c.B) {
					n++
				}
			}
		}
		return n
	}
	// Each of the 35 panels draws a dashed red line across ~250 pixels.
	if red := count(limitColor, b.Min.Y, b.Max.Y); red < 35*100 {
		t.Errorf("%d pixels of the bounds' red: the bound lines are missing", red)
	}
	// The notes, under the grid, one line in each algorithm's colour.
	notes := b.Max.Y - 120
	for i, c := range algoColors {
		if n := count(c, notes, b.Max.Y); n < 50 {
			t.Errorf("%d pixels of algorithm %d's colour under the grid: its note is missing", n, i)
		}
	}
}

// Every panel of the overview holds its algorithm's own bound (Bound) as
// the red line, the policy's Limit as the reference, and the busiest key's
// admitted units in the last window, whose highest point is MaxInWindow
// of that key and never above the red line.
func TestOverviewModel(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	rs := runShapes(t, p)
	f := Overview(rs, p)
	if len(f.Rows) != len(rs) {
		t.Fatalf("%d rows for %d shapes", len(f.Rows), len(rs))
	}
	nb := int((f.End + f.Bucket - 1) / f.Bucket)
	for i, row := range f.Rows {
		r := rs[i]
		focus := FocusKey(r)
		if len(row) != len(r.Outcomes) {
			t.Fatalf("%s: %d panels for %d algorithms", r.Shape.Name, len(row), len(r.Outcomes))
		}
		for j, panel := range row {
			o := r.Outcomes[j]
			bound := float64(Bound(o.Algo, p.Window))
			env := panel.Find(Envelope)
			if env == nil || len(env.Y) != nb || slices.Min(env.Y) != bound || slices.Max(env.Y) != bound {
				t.Errorf("%s %s: envelope series %+v, want %d points at its bound %v", r.Shape.Name, o.Algo.Name, env, nb, bound)
			}
			ref := panel.Find(Reference)
			if ref == nil || len(ref.Y) != nb || slices.Min(ref.Y) != 10 || slices.Max(ref.Y) != 10 {
				t.Errorf("%s %s: reference series %+v, want %d points at the policy's 10", r.Shape.Name, o.Algo.Name, ref, nb)
			}
			adm := panel.Find(Admitted)
			if adm != nil && env != nil && slices.Max(adm.Y) > slices.Max(env.Y) {
				t.Errorf("%s %s: admitted peaks at %v, above the red line at %v", r.Shape.Name, o.Algo.Name, slices.Max(adm.Y), slices.Max(env.Y))
			}
			var mine []Event
			for _, e := range o.Events {
				if e.Allowed && e.Key == focus {
					mine = appendUnits(mine, e)
				}
			}
			slices.SortStableFunc(mine, func(a, b Event) int { return compareDur(a.Start(), b.Start()) })
			if want := MaxInWindow(mine, p.Window); adm == nil || slices.Max(adm.Y) != float64(want) {
				t.Errorf("%s %s: admitted series peaks at %v, want MaxInWindow %d", r.Shape.Name, o.Algo.Name, adm, want)
			}
		}
	}
	for j, want := range []string{"token bucket: 10/20, peak 10 of 19", "fixed window: 20/20, peak 20 of 20"} {
		if got := f.Rows[2][j].Title; got != want {
			t.Errorf("boundary, column %d: title %q, want %q", j, got, want)
		}
	}
	// The notes say which algorithm fits which need, one line each, from
	// Guide.
	if len(f.Notes) != 1+len(rs[0].Outcomes) || f.Notes[0].Algo != -1 {
		t.Fatalf("notes %+v: want a heading and one line per algorithm", f.Notes)
	}
	for i, o := range rs[0].Outcomes {
		if n := f.Notes[1+i]; n.Algo != i || n.Text != Guide(o.Algo, p) {
			t.Errorf("note %d = %+v, want Guide of %s", i, n, o.Algo.Name)
		}
	}
}

// Nothing is cut off: every row's y scale reaches above every series it
// draws, the sent one included (ignore-retry sends far more than is
// admitted), in the overview and in each shape's chart.
func TestNothingIsCutOff(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	rs := runShapes(t, p)
	figs := []Figure{Overview(rs, p)}
	for _, r := range rs {
		figs = append(figs, ShapeFigure(r, p))
	}
	clipped := 0
	for _, f := range figs {
		tops := yTops(f)
		for i, row := range f.Rows {
			for _, panel := range row {
				for _, s := range panel.Series {
					if m := slices.Max(s.Y); m >= tops[i] {
						clipped++
						t.Errorf("%.30q, %s: series %q reaches %v, above the y scale's top %v", f.Title, panel.Title, s.Label, m, tops[i])
					}
				}
			}
		}
	}
	if clipped == 0 {
		// The sent line of ignore-retry must be the row's highest: the
		// check above has something to check.
		f := figs[0]
		sent := f.Rows[3][0].Find(Sent)
		if m := slices.Max(sent.Y); m < 2*slices.Max(f.Rows[3][0].Find(Admitted).Y) {
			t.Errorf("ignore-retry sends only %v: the test no longer covers a sent line far above the rest", m)
		}
	}
}

// The flood shape's chart shows the abuser's own admitted requests beside
// the total, and every chart the policy's average rate per bucket.
func TestShapeFigureAbuserAndLimit(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	rs := runShapes(t, p)
	flood := rs[6]
	if flood.Shape.Name != "flood" || FocusKey(flood) != "abuser" {
		t.Fatalf("shape 6 is %s, focus %q", flood.Shape.Name, FocusKey(flood))
	}
	f := ShapeFigure(flood, p)
	for i, row := range f.Rows {
		o := flood.Outcomes[i]
		want := make([]float64, int((f.End+f.Bucket-1)/f.Bucket))
		for _, e := range o.Events {
			if e.Allowed && e.Key == "abuser" {
				want[e.Start()/f.Bucket]++
			}
		}
		foc := row[0].Find(Focus)
		if foc == nil || foc.Label != `admitted to "abuser"` || !slices.Equal(foc.Y, want) {
			t.Errorf("flood, %s: abuser series %+v, want %v", o.Algo.Name, foc, want)
		}
		// The policy's average rate, a reference, not a limit: no
		// algorithm's own bound is 0.5 per 50 ms.
		ref := row[0].Find(Reference)
		if ref == nil || ref.Y[0] != 0.5 || ref.Label != "rate: 0.5 per 50ms per key" || row[0].Find(Envelope) != nil { // 10 per second, 50 ms buckets
			t.Errorf("flood, %s: reference series %+v, envelope %+v", o.Algo.Name, ref, row[0].Find(Envelope))
		}
	}
	// A shape of one key has no separate focus series.
	if s := ShapeFigure(rs[2], p); s.Rows[0][0].Find(Focus) != nil {
		t.Error("boundary: a focus series on a one-key shape")
	}
	// On a tie, the first key to reach the top number: b has 2 first.
	tie := ShapeResult{Offered: []Request{{0, "a", 1}, {1, "b", 1}, {2, "b", 1}, {3, "a", 1}}}
	if got := FocusKey(tie); got != "b" {
		t.Errorf("FocusKey on a tie = %q, want b", got)
	}
	for name, want := range map[int]string{0: "steady", 3: "client", 5: "user00000", 6: "abuser"} {
		if got := FocusKey(rs[name]); got != want {
			t.Errorf("FocusKey(%s) = %q, want %q", rs[name].Shape.Name, got, want)
		}
	}
}

// Trailing against brute force: for every nanosecond t of each bucket,
// the cost of events in (t−window, t].
func TestTrailingMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for trial := range 200 {
		var evs []Event
		for range rng.IntN(30) {
			evs = append(evs, Event{Request: Request{At: time.Duration(rng.IntN(200)), Cost: int64(rng.IntN(3))}})
		}
		window, bucket := time.Duration(1+rng.IntN(40)), time.Duration(1+rng.IntN(25))
		nb := int(200/bucket) + 1
		at := func(e Event) time.Duration { return e.At }
		got := Trailing(evs, at, window, bucket, nb)
		for b := range nb {
			var want int64
			for tt := time.Duration(b) * bucket; tt < time.Duration(b+1)*bucket; tt++ {
				var n int64
				for _, e := range evs {
					if e.At > tt-window && e.At <= tt {
						n += e.Cost
					}
				}
				want = max(want, n)
			}
			if got[b] != float64(want) {
				t.Fatalf("trial %d, window %v, bucket %v: bucket %d = %v, want %d", trial, window, bucket, b, got[b], want)
			}
		}
	}
}

func TestWriteCharts(t *testing.T) {
	p := Policy{Limit: 10, Window: time.Second, LeakyCapacity: 2}
	rs := runShapes(t, p)
	dir := t.TempDir()
	paths, err := WriteCharts(dir, rs, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{OverviewPath(dir)}
	for _, r := range rs {
		want = append(want, ChartPath(dir, r.Shape.Name))
	}
	if !slices.Equal(paths, want) {
		t.Errorf("paths %v, want %v", paths, want)
	}
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.DecodeConfig(f); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		f.Close()
	}
	if _, err := WriteCharts(filepath.Join(dir, "missing"), rs, p); err == nil || !strings.Contains(err.Error(), "ratelab-overview.png") {
		t.Errorf("into a missing folder: %v, want the overview's error first", err)
	}
}

// No text is cut off: every line of a figure's title, of its notes and of
// each panel's title fits the width it is drawn in, and a y label fits its
// row, for the overview and every shape's chart (the flood shape's names
// its abuser), a policy that one algorithm cannot run, and a trace whose
// busiest key is 1000 bytes long.
func TestTextFits(t *testing.T) {
	p := Policy{Limit: 100, Window: time.Minute, LeakyCapacity: 10}
	rs := runShapes(t, p)
	big := Policy{Limit: 2000, Window: time.Minute, LeakyCapacity: 10} // sliding log n/a
	long := strings.Repeat("k", 1000)
	tr, err := Run(TraceShape("long.csv", []Request{{0, long, 1}, {1, long, 1}, {2, "b", 1}}), Algorithms(big), big)
	if err != nil {
		t.Fatal(err)
	}
	figs := []Figure{Overview(rs, p), Overview([]ShapeResult{tr}, big), ShapeFigure(tr, big)}
	for _, r := range rs {
		figs = append(figs, ShapeFigure(r, p))
	}
	checked := 0
	for _, f := range figs {
		width, panelH := figureSize(f)
		tl := layoutText(f, width)
		fits := func(what string, sty draw.TextStyle, text string, room vg.Length) {
			t.Helper()
			for _, line := range strings.Split(text, "\n") {
				checked++
				if w := sty.Width(line); w > room {
					t.Errorf("%.40q: %s line %q is %.0f pt wide, room for %.0f", f.Title, what, line, w, room)
				}
			}
		}
		fits("title", tl.titleStyle, tl.title, width-2*textMargin)
		for _, n := range tl.notes {
			fits("note", tl.noteStyle, n.Text, width-2*textMargin)
		}
		ysty := plot.New().Y.Label.TextStyle
		for _, row := range f.Rows {
			for _, panel := range row {
				fits("panel title", tl.panelStyle, panelTitle(panel, tl.panelStyle, tl.panelWidth), tl.panelWidth)
				fits("y label", ysty, panel.YLabel, panelH-vg.Inch/2)
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d lines checked", checked)
	}
}
