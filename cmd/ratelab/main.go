// Command ratelab shows what each of hotlimit's rate-limit algorithms
// admits on traffic shapes that matter, before you choose one.
//
// It maps one policy ("100 per minute per key") onto the token bucket,
// fixed window, sliding-window counter, exact sliding log and leaky bucket,
// runs every built-in traffic shape (or a CSV trace of your own traffic)
// through each on a manual clock, deterministically and without waiting,
// and prints per algorithm the requests admitted and denied, the most
// admitted to one key in any interval of the window's length, how many
// admissions the exact sliding log would have denied, the leaky bucket's
// queueing delay, and each algorithm's state bytes per key and ns per
// decision measured on this machine. It writes PNG charts, an overview
// of every shape through every algorithm and one chart per shape, and
// prints their paths.
//
// From the repository root:
//
//	go -C cmd/ratelab run .                       # every shape, 100 per minute
//	go -C cmd/ratelab run . -policy 10/1s -shape boundary,burst
//	go -C cmd/ratelab run . -trace access.csv    # replay your own traffic
//
// Run it with -h for the flags and the definitions of the columns.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/cmd/ratelab/internal/lab"
)

func main() {
	inLabFolder = inLabModule()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// inLabFolder reports whether the command runs as the README's
// "go -C cmd/ratelab run ." does, with ratelab's own module folder as the
// working folder, rather than as an installed binary run from anywhere:
// only then do the usage and the hints speak of go -C.
var inLabFolder bool

// inLabModule reports whether the working folder is ratelab's module
// folder (its go.mod names this module). That is what go -C changes, and
// why a relative path is not read from where the user typed it.
func inLabModule() bool {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(first) == "module github.com/hotlimit/hotlimit/cmd/ratelab"
}

// goRunUsage replaces the usage line when inLabFolder.
const goRunUsage = `usage: go -C cmd/ratelab run . [flags]      (from the repository root)
       ratelab [flags]                        (installed)

Under "go -C cmd/ratelab run .", relative paths (-trace, -out) are taken
from cmd/ratelab: pass -trace "$PWD/access.csv" from the repository root.
`

type options struct {
	policy  string
	queue   int64
	shapes  string
	keys    int
	maxKeys int
	seed    uint64
	out     string
	trace   string
	measure bool
	charts  bool
}

const usageHead = `ratelab runs traffic shapes through hotlimit's algorithms and shows what each admits.

usage: ratelab [flags]

The policy (-policy N/duration: N units per key per duration) is mapped onto
  token bucket    TokenBucket{Rate: N/duration, Burst: N}
  fixed window    FixedWindow{Limit: N, Window: duration}
  sliding window  SlidingWindow{Limit: N, Window: duration} (counter approximation)
  sliding log     SlidingLog{Limit: N, Window: duration} (exact)
  leaky bucket    LeakyBucket{Rate: N/duration, Capacity: -queue}
and each runs on its own limiter and manual clock (deterministic, instant).

Columns, per algorithm and shape:
  admitted, denied  requests.
  most in any W     the most units admitted to one key with start times in one
                    interval [t, t+W), W the policy's duration, over every t
                    (the fixed window's 2× boundary burst shows here).
  its bound         the most the algorithm can admit in any W by its own
                    definition: Burst + ⌈W/T⌉ − 1 (token bucket, T = ⌈W/N⌉),
                    2N (fixed window), 2N − 1 (sliding window), N (sliding
                    log), ⌈W/T⌉ starts (leaky bucket).
  over log          admitted units that an exact sliding log of N per W would
                    deny if fed only this algorithm's admitted requests, in
                    order of start time: 0 means "never more than N in any W".
  delay max, mean   the leaky bucket's queueing delay; an admitted request
                    starts at its arrival plus this delay.
  state bytes/key   heap growth per key (runtime.ReadMemStats once GC settles) over
                    10000 keys each sent min(N, 100) unit requests.
  ns/decision       a timed loop of AllowN on those keys; varies run to run.

Which to pick: after the tables, one line per algorithm says what it admits
(its bound: the most it can admit to one key in any W by its own definition,
such as the token bucket's Burst + ⌈W/T⌉ − 1) and which need it fits.

Charts (-out folder): ratelab-overview.png puts the algorithms side by side:
one row per shape, one column per algorithm, each panel the units sent to and
admitted for the shape's busiest key (the client, the zipf shape's top key,
the flood shape's abuser) in the last W, beside the algorithm's own bound as
a red line (reached, never crossed) and the policy's N as a black dotted
one; the which-to-pick lines are under the grid. ratelab-SHAPE.png shows one
shape in detail: requests sent and admitted per W/20, all keys, the busiest
key's admissions in black when there are several keys, and the policy's
average rate per key (N/20 per bucket) dotted.

Shapes: steady, burst, boundary, ignore-retry, backoff, zipf, flood (each lasts
3 windows; the table describes each). They take a limit of at most 10000 and a
window from 100ns to 8760h; a trace takes any policy some algorithm accepts.

Traces (-trace file.csv): one request per line, "timestamp,key[,cost]";
timestamp is seconds from the trace's start with up to 9 fractional digits
(12.5) or an RFC 3339 time (2026-11-29T23:00:00.25Z), one form per file;
cost defaults to 1; a header line starting "timestamp", "time" or "ts" and
lines starting with # are skipped; lines may be out of order (they are
sorted); a UTF-8 byte-order mark is skipped. Every malformed line is
reported as file:line: reason (the first 20, then how many in all), exit
status 1. A request costing more than an algorithm's capacity (Burst,
Limit, or -queue + 1) is denied every time: ratelab warns.

Exit status: 0 on success, 1 on a run error (a trace or -out that cannot be
used), 2 on bad flags (including a policy that no algorithm accepts). Every
check is made before the run.

Flags:
`

func newFlags(o *options, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ratelab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.policy, "policy", "100/1m", "the limit per key, as N/duration: 100/1m, 10/s, 5/250ms")
	fs.Int64Var(&o.queue, "queue", 10, "the leaky bucket's Capacity: requests that may wait (max delay queue×duration/N)")
	fs.StringVar(&o.shapes, "shape", "all", "shapes to run, comma-separated, or all")
	fs.IntVar(&o.keys, "keys", 1000, "distinct keys in the zipf and flood shapes")
	fs.IntVar(&o.maxKeys, "max-keys", 100, "the limiter's WithMaxKeys bound in the flood shape")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of every random choice (zipf arrivals, backoff jitter)")
	fs.StringVar(&o.out, "out", "ratelab-out", "folder for the PNG charts, created if missing")
	fs.StringVar(&o.trace, "trace", "", "replay this CSV trace instead of the built-in shapes")
	fs.BoolVar(&o.measure, "measure", true, "measure state bytes per key and ns per decision (false: deterministic output)")
	fs.BoolVar(&o.charts, "charts", true, "write the PNG charts")
	fs.Usage = func() {
		head := usageHead
		if inLabFolder {
			head = strings.Replace(head, "usage: ratelab [flags]\n", goRunUsage, 1)
		}
		fmt.Fprint(stderr, head)
		fs.PrintDefaults()
	}
	return fs
}

// run is the command with its arguments and outputs; it returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	var o options
	fs := newFlags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package has printed the error and the usage
	}
	if fs.NArg() > 0 {
		return usageErr(stderr, "unexpected argument %q: every setting is a flag", fs.Arg(0))
	}
	policy, code := o.checkPolicy(stderr)
	if code != 0 {
		return code
	}
	shapes, trace, code := o.shapesToRun(stderr, policy)
	if code != 0 {
		return code
	}
	algos := lab.Algorithms(policy)
	if !lab.Runnable(algos) {
		var why strings.Builder
		for _, a := range algos {
			fmt.Fprintf(&why, "\n  %s: %s", a.Name, strings.TrimPrefix(a.NA, "hotlimit: "))
		}
		return usageErr(stderr, "-policy %s -queue %d: no algorithm accepts it, so nothing can be simulated:%s", o.policy, o.queue, why.String())
	}
	warnCosts(stderr, trace, algos)
	var dir string
	if o.charts {
		// Before the run: an unwritable folder must not cost a whole run.
		var err error
		if dir, err = chartDir(o.out); err != nil {
			fmt.Fprintf(stderr, "ratelab: -out: %v\n", err)
			return 1
		}
	}
	if err := o.report(stdout, policy, algos, shapes, dir); err != nil {
		fmt.Fprintf(stderr, "ratelab: %v\n", err)
		return 1
	}
	return 0
}

// usageErr reports a bad flag and returns exit status 2.
func usageErr(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "ratelab: "+format+"\nRun ratelab -h for the flags.\n", args...)
	return 2
}

// checkPolicy returns the policy the flags describe, or a non-zero exit
// status once it has reported a flag out of range.
func (o *options) checkPolicy(stderr io.Writer) (lab.Policy, int) {
	rate, err := parsePolicy(o.policy)
	if err != nil {
		return lab.Policy{}, usageErr(stderr, "-policy %s: %v", o.policy, err)
	}
	policy := lab.Policy{Limit: rate.N, Window: rate.Per, LeakyCapacity: o.queue}
	switch {
	case o.queue < 0:
		return policy, usageErr(stderr, "-queue must be ≥ 0 (0: no queue), got %d", o.queue)
	case o.keys < 1 || o.keys > 1_000_000:
		return policy, usageErr(stderr, "-keys must be in [1, 1000000], got %d", o.keys)
	case o.maxKeys < 1:
		return policy, usageErr(stderr, "-max-keys must be ≥ 1, got %d", o.maxKeys)
	case o.out == "" && o.charts:
		return policy, usageErr(stderr, "-out must name a folder (or pass -charts=false)")
	}
	return policy, 0
}

// shapesToRun returns the shapes to run (the trace's, when -trace names
// one, and then its requests), or a non-zero exit status once it has
// reported why there are none.
func (o *options) shapesToRun(stderr io.Writer, policy lab.Policy) ([]lab.Shape, []lab.Request, int) {
	if o.trace == "" {
		if err := lab.CheckShapes(policy); err != nil {
			return nil, nil, usageErr(stderr, "-policy %s: %v; -trace takes any policy", o.policy, err)
		}
		all := lab.Shapes(lab.Params{Policy: policy, Keys: o.keys, MaxKeys: o.maxKeys, Seed: o.seed})
		shapes, err := pick(all, o.shapes)
		if err != nil {
			return nil, nil, usageErr(stderr, "-shape: %v", err)
		}
		return shapes, nil, 0
	}
	if o.shapes != "all" {
		return nil, nil, usageErr(stderr, "-trace and -shape are exclusive: a trace replaces the built-in shapes")
	}
	trace, ok := readTrace(stderr, o.trace)
	if !ok {
		return nil, nil, 1
	}
	return []lab.Shape{lab.TraceShape(filepath.Base(o.trace), trace)}, trace, 0
}

// readTrace reads the trace file name, or reports why it cannot.
func readTrace(stderr io.Writer, name string) ([]lab.Request, bool) {
	f, err := os.Open(name)
	if err != nil {
		fmt.Fprintf(stderr, "ratelab: %v\n", err)
		if wd, werr := os.Getwd(); werr == nil && inLabFolder && !filepath.IsAbs(name) {
			fmt.Fprintf(stderr, "ratelab: relative paths are read from %s (go -C changes folder: pass an absolute path, such as \"$PWD/%s\")\n", wd, name)
		}
		return nil, false
	}
	trace, err := lab.ReadTrace(f, name)
	f.Close()
	if err != nil {
		// One line of the error per bad line of the trace.
		for _, l := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "ratelab: %s\n", l)
		}
		return nil, false
	}
	return trace, true
}

// report runs shapes through algos and writes the tables, the guide, the
// measured costs (with -measure) and the charts in dir (with -charts).
func (o *options) report(stdout io.Writer, policy lab.Policy, algos []lab.Algorithm, shapes []lab.Shape, dir string) error {
	lab.WritePolicy(stdout, policy, algos)
	var results []lab.ShapeResult
	for _, s := range shapes {
		r, err := lab.Run(s, algos, policy)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	lab.WriteTable(stdout, policy, results)
	lab.WriteGuide(stdout, policy, algos)
	if o.measure {
		var costs []lab.Cost
		for _, a := range algos {
			c, err := lab.MeasureCost(a, policy, 10_000, 200_000)
			if err != nil {
				return err
			}
			costs = append(costs, c)
		}
		lab.WriteCosts(stdout, costs)
	}
	if !o.charts {
		return nil
	}
	fmt.Fprintln(stdout, "\ncharts: the overview (one row per shape, one column per algorithm: the busiest key's units in the last window, beside each algorithm's bound),")
	fmt.Fprintln(stdout, "then one per shape (requests sent and admitted per bucket, one panel per algorithm):")
	paths, err := lab.WriteCharts(dir, results, policy)
	if err != nil {
		return err
	}
	for _, p := range paths {
		fmt.Fprintf(stdout, "  %s\n", p)
	}
	return nil
}

// policyForm says how to write a policy, for the messages.
const policyForm = "write N/duration: a whole number of requests per key, a slash and a duration, such as 100/1m, 10/s or 5/250ms"

// parsePolicy parses the -policy flag with hotlimit.ParseRate, whose
// errors already say what is wrong in the string's own terms (the count,
// the slash, the duration); only a flag with no slash is told the flag's
// own form, in requests per key.
func parsePolicy(s string) (hotlimit.Rate, error) {
	rate, err := hotlimit.ParseRate(s)
	switch {
	case err == nil:
		return rate, nil
	case !strings.Contains(s, "/"):
		return rate, errors.New(policyForm)
	}
	return rate, errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("hotlimit: rate %q: ", s)))
}

// chartDir returns out as an absolute path, after creating the folder if
// it is missing and checking that a file can be written in it.
func chartDir(out string) (string, error) {
	dir, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".ratelab-check-*")
	if err != nil {
		return "", fmt.Errorf("cannot write the charts in %s: %w", dir, err)
	}
	f.Close()
	return dir, os.Remove(f.Name())
}

// warnCosts warns, for each algorithm that can run, about the requests of
// trace that cost more than its capacity: it denies them every time
// (RetryAfter Never), whatever the traffic around them.
func warnCosts(stderr io.Writer, trace []lab.Request, algos []lab.Algorithm) {
	var lines []string
	for _, a := range algos {
		if a.NA != "" {
			continue
		}
		var n, top int64
		for _, r := range trace {
			if r.Cost > a.Capacity {
				n++
				top = max(top, r.Cost)
			}
		}
		if n > 0 {
			lines = append(lines, fmt.Sprintf("  %s: %d of its capacity %d (%s), up to cost %d",
				a.Name, n, a.Capacity, capacityIs(a.Name), top))
		}
	}
	if len(lines) > 0 {
		fmt.Fprintf(stderr, "ratelab: warning: some requests of the trace cost more than an algorithm's capacity; it denies them every time:\n%s\n",
			strings.Join(lines, "\n"))
	}
}

// capacityIs says where an algorithm's capacity comes from.
func capacityIs(name string) string {
	if name == lab.LeakyBucket {
		return "-queue + 1"
	}
	if name == lab.TokenBucket {
		return "Burst, the policy's N"
	}
	return "the policy's N"
}

// pick returns the shapes named in the comma-separated list (or all).
func pick(all []lab.Shape, list string) ([]lab.Shape, error) {
	if strings.TrimSpace(list) == "all" {
		return all, nil
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	var out []lab.Shape
	seen := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		i := -1
		for j, s := range all {
			if s.Name == n {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("unknown shape %q; the shapes are %s, or all", n, strings.Join(names, ", "))
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, all[i])
		}
	}
	return out, nil
}
