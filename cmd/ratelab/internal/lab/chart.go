package lab

import (
	"bufio"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
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

// WriteChart writes a PNG of r to path: one panel per algorithm, stacked
// on a shared time axis, each showing the requests sent and admitted per
// bucket of Window/Buckets (admitted requests counted at their start time,
// so the leaky bucket's queueing shows). All panels share one y scale.
func WriteChart(path string, r ShapeResult, policy Policy) error {
	end := r.Shape.Duration
	for _, o := range r.Outcomes {
		for _, e := range o.Events {
			end = max(end, e.Start()+1)
		}
	}
	bucket := chartBucket(policy.Window, end)
	nb := int((end + bucket - 1) / bucket)
	unit, unitName := timeUnit(end)

	series := make([][2][]float64, len(r.Outcomes)) // sent, admitted
	var ymax float64
	for i, o := range r.Outcomes {
		sent, adm := make([]float64, nb), make([]float64, nb)
		for _, e := range o.Events {
			sent[e.At/bucket]++
			if e.Allowed {
				adm[e.Start()/bucket]++
			}
		}
		for b := range nb {
			ymax = max(ymax, sent[b], adm[b])
		}
		series[i] = [2][]float64{sent, adm}
	}
	ymax = max(ymax, 1) * 1.45 // headroom for the legend

	rows := make([][]*plot.Plot, len(r.Outcomes))
	for i, o := range r.Outcomes {
		p := plot.New()
		p.Title.Text = o.Algo.Name
		if i == 0 {
			p.Title.Text = fmt.Sprintf("shape %q, policy %d per %v per key: requests per %v bucket, all keys\n%s",
				r.Shape.Name, policy.Limit, policy.Window, bucket, o.Algo.Name)
		}
		p.Title.TextStyle.Font.Size = vg.Points(11)
		p.Y.Label.Text = fmt.Sprintf("requests / %v", bucket)
		p.Y.Min, p.Y.Max = 0, ymax
		p.X.Min, p.X.Max = 0, float64(end)/float64(unit)
		p.X.Tick.Marker = windowTicks(policy.Window, unit)
		p.Add(plotter.NewGrid())
		if i == len(r.Outcomes)-1 {
			p.X.Label.Text = fmt.Sprintf("time since start (%s)", unitName)
		}
		if o.Algo.NA != "" {
			p.Title.Text += ": " + o.Algo.NA
			rows[i] = []*plot.Plot{p}
			continue
		}
		sent, err := stepLine(series[i][0], bucket, unit)
		if err != nil {
			return err
		}
		sent.Color = color.Gray{Y: 110}
		sent.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		sent.Width = vg.Points(1.2)
		adm, err := stepLine(series[i][1], bucket, unit)
		if err != nil {
			return err
		}
		c := plotutil.DarkColors[i%len(plotutil.DarkColors)]
		adm.Color = c
		adm.Width = vg.Points(1.5)
		n := color.NRGBAModel.Convert(c).(color.NRGBA)
		n.A = 90
		adm.FillColor = n
		p.Add(adm, sent)
		p.Legend.Top = true
		p.Legend.Add("sent", sent)
		label := "admitted"
		if o.Algo.Name == LeakyBucket {
			label = "admitted (at start time)"
		}
		p.Legend.Add(label, adm)
		rows[i] = []*plot.Plot{p}
	}

	const width = 10 * vg.Inch
	height := vg.Length(len(rows))*2*vg.Inch + 0.4*vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
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

// ChartPath returns the file name of shape's chart under dir.
func ChartPath(dir, shape string) string {
	return filepath.Join(dir, "ratelab-"+shape+".png")
}
