package lab

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
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
