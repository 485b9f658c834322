package bench_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/bench"
)

// day is a period long enough that no unit comes back during a test.
const day = 24 * time.Hour

// targets returns, for each system under test, a Target over the
// Algorithm a with limit per day; the RLS one against the test's stand-in.
func targets(t *testing.T, a bench.Algorithm, limit int64, keys int) map[string]bench.Target {
	t.Helper()
	names := bench.KeyNames(keys)
	d, gaddr, err := bench.StartGubernator(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	gconns, err := bench.Dial(2, gaddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bench.Close(gconns) })
	rconns, err := bench.Dial(2, startStandIn(t, a, bench.Policy(a, limit, day)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bench.Close(rconns) })
	return map[string]bench.Target{
		"gubernator": &bench.Gubernator{Conns: gconns, Keys: names, Algorithm: a, Limit: limit, Period: day, Behavior: guber.Behavior_NO_BATCHING},
		"rls":        &bench.RLS{Conns: rconns, Keys: names},
	}
}

// TestRunCounts drives each target with a fixed number of requests: every
// request is answered and recorded once, and with one key of limit 5 per
// day exactly 5 are admitted, whatever the schedule: Run counts what the
// services answered, and the callers read their answers right.
func TestRunCounts(t *testing.T) {
	for _, a := range []bench.Algorithm{bench.Bucket, bench.Window} {
		for name, tg := range targets(t, a, 5, 1) {
			t.Run(string(a)+"/"+name, func(t *testing.T) {
				o := bench.Options{Callers: 4, Requests: 40, Keys: 1, Descriptors: 1, Seed: 1}
				res, err := bench.Run(context.Background(), tg, o)
				if err != nil {
					t.Fatal(err)
				}
				if res.Requests != 40 || res.Latency.TotalCount() != 40 {
					t.Fatalf("requests %d, recorded %d, want 40 each", res.Requests, res.Latency.TotalCount())
				}
				if res.Over != 35 {
					t.Fatalf("over the limit: %d, want 35 (5 of 40 admitted)", res.Over)
				}
				if res.Elapsed <= 0 || res.PerSecond() <= 0 || res.Quantile(0.5) <= 0 || res.Quantile(0.99) < res.Quantile(0.5) {
					t.Fatalf("elapsed %v, %v/s, p50 %v, p99 %v", res.Elapsed, res.PerSecond(), res.Quantile(0.5), res.Quantile(0.99))
				}
			})
		}
	}
}

// TestRunOver: with Over set, the keys below it are sent under their
// over-limit rule (1 an hour): each admits its first request and refuses
// every other, while the other keys' rule admits all. One caller, so the
// keys drawn are its PCG stream's, replayed here: the over count is exact.
func TestRunOver(t *testing.T) {
	const keys, over, n = 10, 5, 200
	var hits [keys]int
	rng := rand.New(rand.NewPCG(7, 0))
	for range n {
		hits[rng.IntN(keys)]++
	}
	want := int64(0)
	for k := range over {
		want += int64(max(0, hits[k]-bench.OverLimit))
	}
	for _, a := range []bench.Algorithm{bench.Bucket, bench.Window} {
		for name, tg := range targets(t, a, 1000, keys) {
			// Key names of their own per algorithm: the services are shared.
			switch tg := tg.(type) {
			case *bench.RLS:
				tg.Over, tg.Keys = over, prefixed(string(a), tg.Keys)
			case *bench.Gubernator:
				tg.Over, tg.Keys = over, prefixed(string(a), tg.Keys)
			}
			t.Run(string(a)+"/"+name, func(t *testing.T) {
				res, err := bench.Run(context.Background(), tg, bench.Options{Callers: 1, Requests: n, Keys: keys, Descriptors: 1, Seed: 7})
				if err != nil {
					t.Fatal(err)
				}
				if res.Requests != n || res.Over != want {
					t.Fatalf("requests %d, over %d; want %d, %d", res.Requests, res.Over, n, want)
				}
			})
		}
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, s := range names {
		out[i] = p + s
	}
	return out
}

// TestRunDescriptors: three descriptors per request under a limit no key
// reaches; then, with the limits reached, a request is over the limit when
// any of its descriptors is.
func TestRunDescriptors(t *testing.T) {
	for name, tg := range targets(t, bench.Bucket, 1000, 50) {
		t.Run(name, func(t *testing.T) {
			o := bench.Options{Callers: 3, Requests: 30, Duration: time.Minute, Keys: 50, Descriptors: 3, Seed: 2}
			res, err := bench.Run(context.Background(), tg, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 30 || res.Over != 0 {
				t.Fatalf("requests %d, over %d; want 30, 0", res.Requests, res.Over)
			}
		})
	}
	for name, tg := range targets(t, bench.Bucket, 1, 3) {
		t.Run("limited/"+name, func(t *testing.T) {
			// Three keys of limit 1: each request names three keys, so
			// at most 3 of the requests are admitted.
			o := bench.Options{Callers: 2, Requests: 20, Keys: 3, Descriptors: 3, Seed: 3}
			res, err := bench.Run(context.Background(), tg, o)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 20 || res.Over < 17 {
				t.Fatalf("requests %d, over %d; want 20, at least 17", res.Requests, res.Over)
			}
		})
	}
}

// TestRunDuration: a run capped by time alone ends, having answered some
// requests.
func TestRunDuration(t *testing.T) {
	tg := targets(t, bench.Window, 1000, 10)["rls"]
	res, err := bench.Run(context.Background(), tg, bench.Options{Callers: 2, Duration: 50 * time.Millisecond, Warmup: 10 * time.Millisecond, Keys: 10, Descriptors: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Elapsed < 50*time.Millisecond {
		t.Fatalf("requests %d in %v; want some, in at least 50ms", res.Requests, res.Elapsed)
	}
}

type failing struct{ after, n int }

func (f *failing) NewCaller(int) bench.Caller { return f }
func (f *failing) Call(context.Context, []int) (bool, error) {
	if f.n++; f.n > f.after {
		return false, errors.New("refused")
	}
	return false, nil
}

// TestRunError: a failed call ends the run with its error, in the warmup
// or in the measured part; no result is returned to be read as figures.
func TestRunError(t *testing.T) {
	for _, o := range []bench.Options{
		{Callers: 1, Requests: 10, Keys: 1, Descriptors: 1},
		{Callers: 1, Requests: 10, Warmup: time.Hour, Keys: 1, Descriptors: 1},
	} {
		res, err := bench.Run(context.Background(), &failing{after: 3}, o)
		if err == nil || !strings.Contains(err.Error(), "refused") || res != nil {
			t.Fatalf("%+v: result %v, error %v; want no result and the call's error", o, res, err)
		}
	}
}

// TestRunErrorsTolerated: with MaxErrors, failed calls are counted apart
// and the run goes on; one more than MaxErrors ends it.
func TestRunErrorsTolerated(t *testing.T) {
	o := bench.Options{Callers: 1, Requests: 10, Keys: 1, Descriptors: 1, MaxErrors: 3}
	res, err := bench.Run(context.Background(), &failing{after: 7}, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 7 || res.Errors != 3 || res.Latency.TotalCount() != 7 {
		t.Fatalf("requests %d, errors %d, recorded %d; want 7, 3, 7", res.Requests, res.Errors, res.Latency.TotalCount())
	}
	o.Requests = 11
	res, err = bench.Run(context.Background(), &failing{after: 7}, o)
	if err == nil || !strings.Contains(err.Error(), "4 failed calls") || res != nil {
		t.Fatalf("result %v, error %v; want no result and the fourth failure", res, err)
	}
}

// TestGubernatorCluster: through two gubernator nodes, callers spread on
// both, a key's requests are decided by its owner (forwarded from the
// other node, batched or not): exactly 5 of 40 admitted.
func TestGubernatorCluster(t *testing.T) {
	ds, addrs, err := bench.StartGubernatorCluster(context.Background(), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		t.Cleanup(d.Close)
	}
	conns, err := bench.Dial(2, addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bench.Close(conns) })
	for _, b := range []guber.Behavior{guber.Behavior_NO_BATCHING, guber.Behavior_BATCHING} {
		for _, a := range []bench.Algorithm{bench.Bucket, bench.Window} {
			// Keys of their own: the names differ between the four runs.
			tg := &bench.Gubernator{Conns: conns, Keys: []string{"c" + b.String() + string(a)}, Algorithm: a, Limit: 5, Period: day, Behavior: b}
			res, err := bench.Run(context.Background(), tg, bench.Options{Callers: 4, Requests: 40, Keys: 1, Descriptors: 1, Seed: 4})
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 40 || res.Over != 35 {
				t.Fatalf("%v, %s: requests %d, over %d; want 40, 35", b, a, res.Requests, res.Over)
			}
		}
	}
}

func TestOptionsRefused(t *testing.T) {
	for _, o := range []bench.Options{
		{Requests: 1, Keys: 1, Descriptors: 1},
		{Callers: 1, Requests: 1, Descriptors: 1},
		{Callers: 1, Requests: 1, Keys: 1},
		{Callers: 1, Keys: 1, Descriptors: 1},
		{Callers: 1, Requests: -1, Keys: 1, Descriptors: 1},
		{Callers: 1, Requests: 1, Keys: 1, Descriptors: 1, MaxErrors: -1},
	} {
		if _, err := bench.Run(context.Background(), &failing{}, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// TestConfig: hotlimitd's configuration for the RLS target limits each
// descriptor position by its own rule, with the policy the comparison
// names (bench.Policy), for every algorithm and unit.
func TestConfig(t *testing.T) {
	for _, a := range []bench.Algorithm{bench.Bucket, bench.Window} {
		for unit, period := range bench.Units {
			for _, over := range []bool{false, true} {
				cfg, err := config.Parse("bench.yaml", bench.Config(a, 7, unit, 3, over))
				if err != nil {
					t.Fatalf("%s per %s: %v", a, unit, err)
				}
				n := 3
				if over {
					n = 6
				}
				if got := cfg.Limits(); len(got) != n {
					t.Fatalf("%s per %s, over %v: %d limits, want %d: %v", a, unit, over, len(got), n, got)
				}
				seen := map[string]bool{}
				for j := range 3 {
					keys := map[string]hotlimit.Policy{bench.DescriptorKey(j): bench.Policy(a, 7, period)}
					if over {
						keys[bench.OverKey(j)] = bench.Policy(a, bench.OverLimit, bench.OverPeriod)
					}
					for key, want := range keys {
						l, _, ok := cfg.Match(nil, bench.Domain, []config.Entry{{Key: key, Value: "k000001"}})
						if !ok || l.Policy != want || seen[l.Name] {
							t.Fatalf("%s per %s, descriptor %d, %s: matched %v, limit %+v; want its own limit of policy %+v", a, unit, j, key, ok, l, want)
						}
						seen[l.Name] = true
					}
				}
			}
		}
	}
}
