package lab

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Buckets is the number of chart buckets per policy window.
const Buckets = 20

// MaxChartBuckets bounds the buckets of one chart series: a trace much
// longer than its window gets wider buckets (a whole number of
// Window/Buckets) instead of millions of them.
const MaxChartBuckets = 2000

// WriteChart writes a PNG of r to path, drawn from ShapeFigure: one panel
// per algorithm, stacked on a shared time axis and one y scale.
func WriteChart(path string, r ShapeResult, policy Policy) error {
	f := ShapeFigure(r, policy)
	width, panelH := figureSize(f)
	return writeFigure(path, f, width, panelH)
}

// figureSize returns the width of f's image and the height of each of its
// rows: the overview (f.Grid) has 3 inches per column and 1.9 per row, a
// shape's chart 10 inches and 2 per panel.
func figureSize(f Figure) (width, panelH vg.Length) {
	if !f.Grid {
		return 10 * vg.Inch, 2 * vg.Inch
	}
	cols := 1
	for _, row := range f.Rows {
		cols = max(cols, len(row))
	}
	return vg.Length(cols) * 3 * vg.Inch, 1.9 * vg.Inch
}

// WriteOverview writes a PNG of Overview(results, policy) to path: one
// row per shape, one column per algorithm.
func WriteOverview(path string, results []ShapeResult, policy Policy) error {
	f := Overview(results, policy)
	if len(f.Rows) == 0 {
		return fmt.Errorf("overview %s: no shapes", path)
	}
	width, panelH := figureSize(f)
	return writeFigure(path, f, width, panelH)
}

// WriteCharts writes the overview of results and one chart per shape
// under dir, and returns their paths: the overview's first, then the
// shapes' in order. It stops at the first chart that fails.
func WriteCharts(dir string, results []ShapeResult, policy Policy) ([]string, error) {
	paths := []string{OverviewPath(dir)}
	if err := WriteOverview(paths[0], results, policy); err != nil {
		return nil, err
	}
	for _, r := range results {
		path := ChartPath(dir, r.Shape.Name)
		if err := WriteChart(path, r, policy); err != nil {
			return nil, fmt.Errorf("chart %s: %w", r.Shape.Name, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// Colours of the algorithms, in their order, and of the other series:
// none of the algorithms' is red, the limit's.
var (
	algoColors = []color.RGBA{
		{R: 24, G: 90, B: 169, A: 255},  // blue
		{R: 0, G: 140, B: 72, A: 255},   // green
		{R: 244, G: 125, B: 35, A: 255}, // orange
		{R: 102, G: 44, B: 145, A: 255}, // purple
		{R: 0, G: 150, B: 160, A: 255},  // teal
	}
	sentColor  = color.Gray{Y: 110}
	focusColor = color.Gray{Y: 0}
	limitColor = color.RGBA{R: 215, G: 25, B: 28, A: 255}
)

// writeFigure draws f, each panel panelH high and the figure width wide,
// into a PNG at path.
func writeFigure(path string, f Figure, width, panelH vg.Length) error {
	unit, unitName := timeUnit(f.End)
	tops := yTops(f)
	tl := layoutText(f, width)
	rows := make([][]*plot.Plot, len(f.Rows))
	for i, row := range f.Rows {
		top := tops[i]
		for _, panel := range row {
			p, err := drawPanel(panel, top, f.Bucket, f.End, unit, f.Window, tl.panelWidth)
			if err != nil {
				return err
			}
			if i == len(f.Rows)-1 {
				p.X.Label.Text = fmt.Sprintf("time since start (%s)", unitName)
			}
			rows[i] = append(rows[i], p)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("chart %s: nothing to draw", path)
	}
	cols := len(rows[0])
	for _, r := range rows {
		if len(r) != cols {
			return fmt.Errorf("chart rows of %d and %d panels", cols, len(r))
		}
	}
	// The title spans the figure, above the grid; the notes are left-aligned
	// under it, a line each.
	titleH := vg.Length(strings.Count(tl.title, "\n")+1)*tl.titleStyle.Font.Size*1.3 + 3*vg.Millimeter
	lineH := tl.noteStyle.Font.Size * 1.35
	notesH := vg.Length(0)
	if len(tl.notes) > 0 {
		notesH = vg.Length(len(tl.notes))*lineH + 4*vg.Millimeter
	}
	height := vg.Length(len(rows))*panelH + 0.3*vg.Inch + titleH + notesH
	img := vgimg.New(width, height)
	full := draw.New(img)
	full.FillText(tl.titleStyle, vg.Point{X: width / 2, Y: height - 2*vg.Millimeter}, tl.title)
	for k, n := range tl.notes {
		sty := tl.noteStyle
		sty.Color = focusColor
		if n.Algo >= 0 {
			sty.Color = algoColors[n.Algo%len(algoColors)]
		}
		full.FillText(sty, vg.Point{X: textMargin, Y: notesH - 2*vg.Millimeter - vg.Length(k)*lineH}, n.Text)
	}
	dc := draw.Crop(full, 0, 0, notesH, -titleH)
	tiles := draw.Tiles{Rows: len(rows), Cols: cols, PadX: 3 * vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(canvases[i][j])
		}
	}
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(fh)
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		fh.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return fh.Close()
}

// textMargin is the space kept between text and the figure's sides.
const textMargin = 4 * vg.Millimeter

// textLayout is a figure's text fitted to its width: no line of the
// title, of a note or of a panel title is wider than the space it has.
type textLayout struct {
	title      string // f.Title, its lines broken to fit
	titleStyle draw.TextStyle
	notes      []Note // f.Notes, one per line, broken to fit
	noteStyle  draw.TextStyle
	panelWidth vg.Length // room for a panel's title
	panelStyle draw.TextStyle
}

// layoutText fits f's text to a figure width wide.
func layoutText(f Figure, width vg.Length) textLayout {
	cols := 1
	for _, row := range f.Rows {
		cols = max(cols, len(row))
	}
	tl := textLayout{
		titleStyle: plot.New().Title.TextStyle,
		panelWidth: width/vg.Length(cols) - 2*textMargin,
	}
	tl.titleStyle.Font.Size = vg.Points(12)
	tl.titleStyle.XAlign, tl.titleStyle.YAlign = draw.XCenter, draw.YTop
	tl.noteStyle = tl.titleStyle
	tl.noteStyle.Font.Size = vg.Points(11)
	tl.noteStyle.XAlign = draw.XLeft
	tl.panelStyle = tl.titleStyle
	tl.panelStyle.Font.Size = vg.Points(10)
	tl.title = fit(tl.titleStyle, f.Title, width-2*textMargin)
	for _, n := range f.Notes {
		for _, line := range strings.Split(fit(tl.noteStyle, n.Text, width-2*textMargin), "\n") {
			tl.notes = append(tl.notes, Note{Text: line, Algo: n.Algo})
		}
	}
	return tl
}

// fit breaks each line of s wider than width, in sty, at spaces: as many
// words on a line as fit. A single word wider than width stays whole (the
// figures shorten the one such text they print, a key: see shortKey).
func fit(sty draw.TextStyle, s string, width vg.Length) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		cur := ""
		for _, w := range strings.Split(line, " ") {
			switch {
			case cur == "":
				cur = w
			case sty.Width(cur+" "+w) > width:
				out = append(out, cur)
				cur = w
			default:
				cur += " " + w
			}
		}
		out = append(out, cur)
	}
	return strings.Join(out, "\n")
}

// panelMax returns the highest value a panel draws, over every series:
// the y scale covers all of it, so no line is cut off (a client sending
// far more than is admitted, as on ignore-retry, makes what is admitted
// look small, and that is the truth of it).
func panelMax(p Panel) float64 {
	var m float64
	for _, s := range p.Series {
		m = max(m, slices.Max(append([]float64{0}, s.Y...)))
	}
	return m
}

// yTops returns the top of each row's y scale: per row when f.ShareRows,
// else one over the figure; above every value drawn, with headroom.
func yTops(f Figure) []float64 {
	tops := make([]float64, len(f.Rows))
	var all float64
	for i, row := range f.Rows {
		for _, p := range row {
			tops[i] = max(tops[i], panelMax(p))
		}
		all = max(all, tops[i])
	}
	for i := range tops {
		if !f.ShareRows {
			tops[i] = all
		}
		tops[i] = max(tops[i], 1) * 1.15 // headroom above the highest line
	}
	return tops
}

// drawPanel returns the plot of one panel with y from 0 to top.
func drawPanel(panel Panel, top float64, bucket, end, unit, window time.Duration, titleWidth vg.Length) (*plot.Plot, error) {
	p := plot.New()
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.Title.Text = panelTitle(panel, p.Title.TextStyle, titleWidth)
	p.Y.Label.Text = panel.YLabel
	p.X.Tick.Marker = windowTicks(window, unit)
	p.Y.Tick.Marker = countTicks{}
	p.Add(plotter.NewGrid())
	for _, s := range panel.Series {
		line, err := stepLine(s.Y, bucket, unit)
		if err != nil {
			return nil, err
		}
		switch s.Kind {
		case Sent:
			line.Color = sentColor
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			line.Width = vg.Points(1.2)
		case Admitted:
			c := algoColors[panel.Algo%len(algoColors)]
			line.Color = c
			line.Width = vg.Points(1.5)
			c.A = 80 // pre-multiplied: a light tint of c
			c.R, c.G, c.B = uint8(int(c.R)*80/255), uint8(int(c.G)*80/255), uint8(int(c.B)*80/255)
			line.FillColor = c
		case Focus:
			line.Color = focusColor
			line.Width = vg.Points(1.5)
		case Envelope:
			line.Color = limitColor
			line.Width = vg.Points(1.5)
			line.Dashes = []vg.Length{vg.Points(7), vg.Points(3)}
		case Reference:
			line.Color = focusColor
			line.Width = vg.Points(0.8)
			line.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
		}
		p.Add(line)
	}
	// After Add, which widens the axes to the data: a clipped sent line
	// stays clipped.
	p.Y.Min, p.Y.Max = 0, top
	p.X.Min, p.X.Max = 0, float64(end)/float64(unit)
	return p, nil
}

// panelTitle returns panel's title, with why it did not run when it did
// not, fitted to width in sty.
func panelTitle(panel Panel, sty draw.TextStyle, width vg.Length) string {
	t := panel.Title
	if panel.NA != "" {
		t += ":\n" + strings.TrimPrefix(panel.NA, "hotlimit: ")
	}
	return fit(sty, t, width)
}

// chartBucket returns the width of a chart bucket for a chart from 0 to
// end: Window/Buckets, or the smallest multiple of it that keeps the
// chart within MaxChartBuckets buckets.
func chartBucket(window, end time.Duration) time.Duration {
	b := max(window/Buckets, 1)
	if end <= 0 {
		return b
	}
	if n := (end-1)/b + 1; n > MaxChartBuckets {
		b *= (n-1)/MaxChartBuckets + 1
	}
	return b
}

// stepLine returns a step line of counts per bucket, x in unit.
func stepLine(counts []float64, bucket, unit time.Duration) (*plotter.Line, error) {
	xy := make(plotter.XYs, len(counts)+1)
	for b, n := range counts {
		xy[b] = plotter.XY{X: float64(time.Duration(b)*bucket) / float64(unit), Y: n}
	}
	last := len(counts)
	xy[last] = plotter.XY{X: float64(time.Duration(last)*bucket) / float64(unit)}
	if last > 0 {
		xy[last].Y = counts[last-1]
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PostStep
	return l, nil
}

// countTicks marks a count axis at round steps (1, 2 or 5 × 10^k), about
// four of them, labelled without a fraction when the step is whole.
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return nil
	}
	raw := (hi - lo) / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{2, 5, 10} {
		if step >= raw {
			break
		}
		step = m * mag
	}
	var ts []plot.Tick
	for x := math.Ceil(lo/step) * step; x <= hi; x += step {
		ts = append(ts, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'g', 6, 64)})
	}
	return ts
}

// windowTicks marks the x axis at window edges (every k windows when
// there would be more than 12), so the grid shows the fixed window's edges.
func windowTicks(window, unit time.Duration) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		w := float64(window) / float64(unit)
		if w <= 0 || hi <= lo {
			return nil
		}
		step := w * math.Ceil((hi-lo)/w/12)
		var ts []plot.Tick
		for x := math.Ceil(lo/step) * step; x <= hi+step/1e6; x += step {
			ts = append(ts, plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'g', 6, 64)})
		}
		return ts
	})
}

// timeUnit picks a unit for a time axis that spans d.
func timeUnit(d time.Duration) (time.Duration, string) {
	switch {
	case d >= 10*time.Hour:
		return time.Hour, "h"
	case d >= 10*time.Minute:
		return time.Minute, "min"
	case d >= 10*time.Second:
		return time.Second, "s"
	case d >= 10*time.Millisecond:
		return time.Millisecond, "ms"
	}
	return time.Microsecond, "µs"
}

// OverviewPath returns the file name of the overview under dir.
func OverviewPath(dir string) string {
	return filepath.Join(dir, "ratelab-overview.png")
}

// ChartPath returns the file name of shape's chart under dir.
func ChartPath(dir, shape string) string {
	return filepath.Join(dir, "ratelab-"+shape+".png")
}
