package main

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from the current output")

// runCmd runs the command and returns its exit status and outputs.
func runCmd(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestGolden checks the whole default report, byte for byte, for a fixed
// seed with measurement off. Run with -update after an intended change,
// and read the diff.
func TestGolden(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd("-measure=false", "-seed", "1", "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	out = strings.ReplaceAll(out, dir, "$OUT")
	golden := filepath.Join("testdata", "golden.txt")
	if *update {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (go test -run TestGolden -update rewrites it):\n%s", golden, out)
	}
	// Every chart it lists exists and is a PNG.
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "$OUT"); ok {
			n++
			f, err := os.Open(dir + p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := png.DecodeConfig(f); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			f.Close()
		}
	}
	if n != 7 {
		t.Errorf("%d charts listed, want one per shape (7)", n)
	}
}

func TestGoldenIsDeterministic(t *testing.T) {
	_, a, _ := runCmd("-measure=false", "-charts=false", "-shape", "zipf,backoff,flood", "-seed", "5")
	_, b, _ := runCmd("-measure=false", "-charts=false", "-shape", "zipf,backoff,flood", "-seed", "5")
	_, c, _ := runCmd("-measure=false", "-charts=false", "-shape", "zipf,backoff,flood", "-seed", "6")
	if a != b {
		t.Error("two runs with one seed differ")
	}
	if a == c {
		t.Error("seeds 5 and 6 gave the same report")
	}
}

func TestMeasureColumns(t *testing.T) {
	code, out, errOut := runCmd("-charts=false", "-shape", "steady")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"state bytes/key", "ns/decision", "heap growth"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestHelp(t *testing.T) {
	code, out, errOut := runCmd("-h")
	if code != 0 || out != "" {
		t.Errorf("-h: exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"-policy", "-shape", "-keys", "-seed", "-out", "-trace", "-measure", "over log", "timestamp,key[,cost]"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("-h does not explain %q", want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-policy", "fast"}, "ratelab: -policy: rate \"fast\""},
		{[]string{"-policy", "0/1m"}, "ratelab: -policy:"},
		{[]string{"-policy", "20000/1m"}, "at most 10000"},
		{[]string{"-queue", "-1"}, "ratelab: -queue must be ≥ 0"},
		{[]string{"-keys", "0"}, "ratelab: -keys must be in [1, 1000000], got 0"},
		{[]string{"-max-keys", "0"}, "ratelab: -max-keys must be ≥ 1"},
		{[]string{"-shape", "steady,nope"}, `ratelab: -shape: unknown shape "nope"; the shapes are steady, burst, boundary, ignore-retry, backoff, zipf, flood, or all`},
		{[]string{"-out", ""}, "ratelab: -out must name a folder"},
		{[]string{"-trace", "x.csv", "-shape", "zipf"}, "exclusive"},
		{[]string{"extra"}, `ratelab: unexpected argument "extra"`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
		{[]string{"-keys", "many"}, `invalid value "many" for flag -keys`},
	}
	for _, tt := range tests {
		code, out, errOut := runCmd(tt.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, out, errOut, tt.want)
		}
	}
}

func TestTrace(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd("-trace", filepath.Join("testdata", "sample.csv"), "-policy", "60/1m", "-measure=false", "-out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) > 3 {
			rows[f[0]+" "+f[1]] = strings.Join(f[2:], " ")
		}
	}
	// The sample holds 236 requests from 3 keys; the batch job (150 in 6 s)
	// is what the algorithms disagree on.
	if !strings.Contains(out, "236 requests from 3 keys") {
		t.Errorf("trace summary missing:\n%s", out)
	}
	if r := rows["sliding log"]; !strings.HasPrefix(r, "143 93 60 0") {
		t.Errorf("sliding log row %q: want 143 admitted, 93 denied, at most 60 in a window, 0 over", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "ratelab-trace.png")); err != nil {
		t.Error(err)
	}
}

func TestBadTrace(t *testing.T) {
	code, out, errOut := runCmd("-trace", filepath.Join("testdata", "bad.csv"), "-charts=false")
	want := `ratelab: ` + filepath.Join("testdata", "bad.csv") + `:4: cost "two": want a whole number ≥ 0`
	if code != 1 || out != "" || strings.TrimSpace(errOut) != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errOut, want)
	}
	if code, _, errOut := runCmd("-trace", filepath.Join("testdata", "missing.csv")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing trace: exit %d, %q", code, errOut)
	}
}
