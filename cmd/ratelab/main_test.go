package main

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
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
	if n != 8 {
		t.Errorf("%d charts listed, want the overview and one per shape (8)", n)
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
	for _, want := range []string{"-policy", "-shape", "-keys", "-seed", "-out", "-trace", "-measure", "over log", "timestamp,key[,cost]", "ratelab-overview.png", "byte-order mark"} {
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
		{[]string{"-policy", "fast"}, "ratelab: -policy fast: write N/duration: a whole number of requests per key, a slash and a duration, such as 100/1m, 10/s or 5/250ms\n"},
		{[]string{"-policy", "20000/1m"}, "at most 10000"},
		{[]string{"-policy", "100/-1m"}, `ratelab: -policy 100/-1m: the duration after the slash must be positive, got "-1m"`},
		{[]string{"-policy", "1/1ns"}, "-policy 1/1ns: the built-in shapes need a window of at least 100ns"},
		{[]string{"-policy", "1/1000000h", "-shape", "boundary"}, "-policy 1/1000000h: the built-in shapes need a window of at most 8760h0m0s"},
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
	if r := rows["sliding log"]; !strings.HasPrefix(r, "143 93 60 60 0") {
		t.Errorf("sliding log row %q: want 143 admitted, 93 denied, at most 60 in a window, its bound 60, 0 over", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "ratelab-trace.png")); err != nil {
		t.Error(err)
	}
}

func TestBadTrace(t *testing.T) {
	code, out, errOut := runCmd("-trace", filepath.Join("testdata", "bad.csv"), "-charts=false")
	bad := "ratelab: " + filepath.Join("testdata", "bad.csv")
	// Every bad line, each on a line of its own, not only the first.
	want := bad + `:4: cost "two": want a whole number ≥ 0` + "\n" +
		bad + ":5: empty key\n" +
		bad + `:6: timestamp "-3": negative time` + "\n"
	if code != 1 || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and:\n%s", code, out, errOut, want)
	}
	if code, _, errOut := runCmd("-trace", filepath.Join("testdata", "missing.csv")); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("missing trace: exit %d, %q", code, errOut)
	}
}

// When every algorithm rejects the policy, nothing can be simulated: a
// clear error before the run and a non-zero exit, not a table of n/a.
func TestNoAlgorithmAcceptsThePolicy(t *testing.T) {
	sample := filepath.Join("testdata", "sample.csv")
	code, out, errOut := runCmd("-trace", sample, "-policy", "1/1000000h", "-out", t.TempDir())
	if code != 2 || out != "" || !strings.Contains(errOut, "-policy 1/1000000h -queue 10: no algorithm accepts it, so nothing can be simulated") ||
		!strings.Contains(errOut, "  leaky bucket: LeakyBucket.Capacity 10") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// One algorithm left is enough to run.
	if code, _, errOut := runCmd("-trace", sample, "-policy", "1/100000h", "-queue", "0", "-charts=false", "-measure=false"); code != 0 {
		t.Errorf("token and leaky bucket accept 1/100000h: exit %d, %s", code, errOut)
	}
}

// An -out that cannot be written fails before the run, not after it.
func TestOutIsCheckedBeforeTheRun(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{file, filepath.Join(file, "sub")} {
		code, stdout, errOut := runCmd("-measure=false", "-shape", "steady", "-out", out)
		if code != 1 || stdout != "" || !strings.HasPrefix(errOut, "ratelab: -out: ") {
			t.Errorf("-out %s: exit %d, stdout %q, stderr %q; want exit 1 before any output", out, code, stdout, errOut)
		}
	}
	// The check leaves nothing behind in a folder that works.
	dir := t.TempDir()
	if code, _, errOut := runCmd("-measure=false", "-shape", "steady", "-out", dir); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("-out holds %d files, want the overview and the chart: %v", len(ents), ents)
	}
}

// A CSV saved by a spreadsheet starts with a UTF-8 byte-order mark.
func TestTraceWithByteOrderMark(t *testing.T) {
	sample, err := os.ReadFile(filepath.Join("testdata", "sample.csv"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "excel.csv")
	if err := os.WriteFile(path, append([]byte("\xEF\xBB\xBF"), sample...), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("-trace", path, "-policy", "60/1m", "-measure=false", "-charts=false")
	if code != 0 || !strings.Contains(out, "236 requests from 3 keys") {
		t.Errorf("exit %d, stderr %q, stdout:\n%s", code, errOut, out)
	}
}

// A request costing more than an algorithm's capacity is denied every
// time: the command says so before the run, naming the algorithms.
func TestCostAboveCapacityWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "costly.csv")
	if err := os.WriteFile(path, []byte("0,a,1\n1,a,50\n2,b,150\n3,b,12\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd("-trace", path, "-policy", "100/1m", "-queue", "10", "-measure=false", "-charts=false")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"ratelab: warning: some requests of the trace cost more than an algorithm's capacity; it denies them every time:",
		"  token bucket: 1 of its capacity 100 (Burst, the policy's N), up to cost 150",
		"  sliding log: 1 of its capacity 100 (the policy's N), up to cost 150",
		"  leaky bucket: 3 of its capacity 11 (-queue + 1), up to cost 150",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	// The warning tells the truth: the leaky bucket admits only the first.
	if !regexp.MustCompile(`(?m)^ *leaky bucket +1 +3 `).MatchString(out) {
		t.Errorf("leaky bucket row: want 1 admitted, 3 denied:\n%s", out)
	}
	// No warning when every cost fits.
	if _, _, errOut := runCmd("-trace", filepath.Join("testdata", "sample.csv"), "-measure=false", "-charts=false"); strings.Contains(errOut, "warning") {
		t.Errorf("sample trace warned: %s", errOut)
	}
}

// negDur matches a negative duration as time.Duration prints it.
var negDur = regexp.MustCompile(`-[0-9.]+(ns|µs|ms|s|m|h)`)

// Extreme policies, queues and traces: never a panic, never a negative
// duration printed (an overflowed product or sum), and a non-zero exit
// whenever nothing was simulated.
func TestExtremesPrintNoNegativeDuration(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, "long.csv")
	if err := os.WriteFile(long, []byte("0,a,1\n3153600000,a,2\n1,b,9223372036854775807\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join("testdata", "sample.csv")
	for _, args := range [][]string{
		{"-policy", "1/8760h", "-queue", "100000000000"},
		{"-policy", "1/8760h", "-queue", "9223372036854775807", "-shape", "backoff,ignore-retry"},
		{"-policy", "100/8760h", "-queue", "600", "-shape", "burst,backoff"},
		{"-policy", "10000/100ms", "-shape", "boundary,backoff"},
		{"-policy", "1/100ns"},
		{"-policy", "1/1000000h", "-trace", sample},
		{"-policy", "1/100000h", "-queue", "5", "-trace", sample},
		{"-policy", "9223372036854775807/2562047h", "-trace", sample},
		{"-policy", "1/1ns", "-queue", "9223372036854775807", "-trace", long},
		{"-policy", "3/1h", "-queue", "100000", "-trace", long},
	} {
		code, out, errOut := runCmd(append(args, "-measure=false", "-charts=false", "-keys", "50")...)
		if m := negDur.FindString(out + errOut); m != "" {
			t.Errorf("%q printed the negative duration %s:\n%s%s", args, m, out, errOut)
		}
		if code == 0 && strings.Count(out, " n/a ") > 0 && !strings.Contains(out, "admitted") {
			t.Errorf("%q: exit 0 with nothing simulated", args)
		}
		if code != 0 && out != "" {
			t.Errorf("%q: exit %d after printing a report", args, code)
		}
	}
}

// A bad -policy is explained in the flag's own words (the count, the
// slash, the duration), never with hotlimit's field names (rate.N) or
// the text of strconv or time.ParseDuration.
func TestPolicyMessagesInTheUsersWords(t *testing.T) {
	for policy, want := range map[string]string{
		"0/1m":                    `the count before the slash must be a whole number of at least 1, got "0"`,
		"-5/1m":                   `the count before the slash must be a whole number of at least 1, got "-5"`,
		"1.5/1m":                  `the count before the slash must be a whole number of at least 1, got "1.5"`,
		"99999999999999999999/1m": "the count 99999999999999999999 is too large (at most 9223372036854775807)",
		"100":                     "write N/duration: a whole number of requests per key, a slash and a duration, such as 100/1m, 10/s or 5/250ms",
		"100/1m/2":                "one slash only: write N/duration",
		"100/":                    "the duration after the slash is missing: write a number and a unit (ns, us, ms, s, m, h)",
		"100/1y":                  `"1y" after the slash is not a duration: write a number and a unit (ns, us, ms, s, m, h), such as 1m, 250ms or 24h (a day), or a unit alone (10/s)`,
		"100/0s":                  `the duration after the slash must be positive, got "0s"`,
		"1001/1us":                "1001 per 1µs is faster than one request per nanosecond, the finest step of the clock",
	} {
		code, out, errOut := runCmd("-policy", policy, "-charts=false", "-measure=false")
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "ratelab: -policy "+policy+": "+want) {
			t.Errorf("-policy %s: exit %d, stderr %q; want exit 2 and %q", policy, code, errOut, want)
		}
		for _, internal := range []string{"rate.N", "rate.Per", "time:", "strconv", "ParseInt", "hotlimit:"} {
			if strings.Contains(errOut, internal) {
				t.Errorf("-policy %s: the message names %q: %s", policy, internal, errOut)
			}
		}
	}
	// What is fine runs, bare units and spaces included.
	for _, policy := range []string{"10/s", " 10 / 1m ", "1000/1us", "5/250ms"} {
		if code, _, errOut := runCmd("-policy", policy, "-charts=false", "-measure=false", "-shape", "steady"); code != 0 {
			t.Errorf("-policy %q: exit %d: %s", policy, code, errOut)
		}
	}
}

// An installed binary, run from anywhere, never speaks of go -C: not in
// -h, not in the hint for a relative -trace that is missing. Run as the
// README's "go -C cmd/ratelab run .", both explain it.
func TestGoCOnlyUnderGoRun(t *testing.T) {
	defer func(old bool) { inLabFolder = old }(inLabFolder)
	for _, under := range []bool{false, true} {
		inLabFolder = under
		_, _, help := runCmd("-h")
		code, _, missing := runCmd("-trace", "no-such-trace.csv")
		if code != 1 || !strings.HasPrefix(missing, "ratelab: open no-such-trace.csv: no such file") {
			t.Fatalf("missing trace: exit %d, %q", code, missing)
		}
		for what, text := range map[string]string{"-h": help, "the missing-trace hint": missing} {
			if got := strings.Contains(text, "go -C"); got != under {
				t.Errorf("under go run %v, %s mentions go -C: %v:\n%s", under, what, got, text)
			}
		}
	}
	// The test runs in ratelab's module folder, as go -C leaves it.
	if !inLabModule() {
		t.Error("inLabModule is false in cmd/ratelab")
	}
	t.Chdir(t.TempDir())
	if inLabModule() {
		t.Error("inLabModule is true outside cmd/ratelab")
	}
}
