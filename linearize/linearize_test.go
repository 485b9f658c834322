package linearize

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/hotlimit/hotlimit"
)

const us = time.Microsecond

// envInt reads a positive integer from the environment, else def.
func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// rateConfigs are the limiters whose histories are checked: every table
// algorithm, each with the policies SetPolicy switches between.
func rateConfigs() map[string]RateConfig {
	gate := hotlimit.FixedWindow{Limit: 2, Window: 50 * us}
	per := func(d time.Duration) hotlimit.Rate { return hotlimit.Rate{N: 1, Per: d} }
	return map[string]RateConfig{
		"TokenBucket": {Policies: []hotlimit.Policy{
			hotlimit.TokenBucket{Rate: per(10 * us), Burst: 3},
			hotlimit.TokenBucket{Rate: per(10 * us), Burst: 5},
			hotlimit.TokenBucket{Rate: per(20 * us), Burst: 3},
		}, Gate: gate},
		"LeakyBucket": {Policies: []hotlimit.Policy{
			hotlimit.LeakyBucket{Rate: per(10 * us), Capacity: 2},
			hotlimit.LeakyBucket{Rate: per(10 * us), Capacity: 4},
		}, Gate: gate},
		"FixedWindow": {Policies: []hotlimit.Policy{
			hotlimit.FixedWindow{Limit: 3, Window: 50 * us},
			hotlimit.FixedWindow{Limit: 4, Window: 50 * us},
			hotlimit.FixedWindow{Limit: 3, Window: 100 * us},
		}, Gate: gate},
		"SlidingWindow": {Policies: []hotlimit.Policy{
			hotlimit.SlidingWindow{Limit: 3, Window: 50 * us},
			hotlimit.SlidingWindow{Limit: 5, Window: 50 * us},
			hotlimit.SlidingWindow{Limit: 3, Window: 100 * us},
		}, Gate: gate},
	}
}

// TestRateLinearizable checks LINEARIZE_HISTORIES histories (default 10)
// per algorithm, each of LINEARIZE_WORKERS goroutines (default 4) making
// LINEARIZE_OPS operations (default 40) on 2 keys, from seed
// LINEARIZE_SEED on (default 1).
func TestRateLinearizable(t *testing.T) { testRate(t, 2, 0) }

// TestEvictLinearizable is TestRateLinearizable on one key under
// WithMaxKeys(1), with goroutine 0 now and then admitting a key of its
// own, which evicts the one A holds: give-backs, Waits and layered
// requests then straddle evictions, and each evicting insertion is two
// steps, its eviction and its decision (see RateConfig.MaxKeys and
// evictSplit).
func TestEvictLinearizable(t *testing.T) { testRate(t, 1, 1) }

func testRate(t *testing.T, keys, maxKeys int) {
	histories := envInt(t, "LINEARIZE_HISTORIES", 10)
	workers := envInt(t, "LINEARIZE_WORKERS", 4)
	ops := envInt(t, "LINEARIZE_OPS", 40)
	seed := envInt(t, "LINEARIZE_SEED", 1)
	for name, cfg := range rateConfigs() {
		t.Run(name, func(t *testing.T) {
			cfg.Keys, cfg.Workers, cfg.Ops, cfg.Step, cfg.MaxKeys = keys, workers, ops, 20*us, maxKeys
			total := 0
			steps := map[string]int{}
			for i := range histories {
				cfg.Seed = uint64(seed + i)
				n, res, info, kinds, err := checkRate(cfg, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				total += n
				for k, c := range kinds {
					steps[k] += c
				}
				switch res {
				case porcupine.Illegal:
					path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-seed%d.html", name, cfg.Seed))
					if os.Getenv("LINEARIZE_KEEP") != "" {
						path = filepath.Join(os.TempDir(), filepath.Base(path))
					}
					if err := porcupine.VisualizePath(Model(cfg), info, path); err != nil {
						t.Log(err)
					}
					t.Fatalf("seed %d: a history of %d operations is not linearizable (visualization: %s; set LINEARIZE_KEEP=1 to keep it)", cfg.Seed, n, path)
				case porcupine.Unknown:
					t.Fatalf("seed %d: porcupine gave up on a history of %d operations", cfg.Seed, n)
				}
			}
			t.Logf("%d histories, %d operations, all linearizable; steps: %v", histories, total, steps)
		})
	}
}

// TestConcurrencyLinearizable checks LINEARIZE_HISTORIES histories
// (default 10) of a ConcurrencyLimiter of limit 2 on 2 keys: TryAcquireN,
// AcquireN, Release (twice, now and then), InFlight and Sweep.
func TestConcurrencyLinearizable(t *testing.T) {
	histories := envInt(t, "LINEARIZE_HISTORIES", 10)
	workers := envInt(t, "LINEARIZE_WORKERS", 4)
	ops := envInt(t, "LINEARIZE_OPS", 40)
	seed := envInt(t, "LINEARIZE_SEED", 1)
	cfg := ConcConfig{Limit: 2, Keys: 2, Workers: workers, Ops: ops}
	total := 0
	for i := range histories {
		cfg.Seed = uint64(seed + i)
		n, res, info, err := CheckConc(cfg, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		total += n
		switch res {
		case porcupine.Illegal:
			path := filepath.Join(t.TempDir(), fmt.Sprintf("concurrency-seed%d.html", cfg.Seed))
			if os.Getenv("LINEARIZE_KEEP") != "" {
				path = filepath.Join(os.TempDir(), filepath.Base(path))
			}
			if err := porcupine.VisualizePath(concModel(cfg), info, path); err != nil {
				t.Log(err)
			}
			t.Fatalf("seed %d: a history of %d operations is not linearizable (visualization: %s)", cfg.Seed, n, path)
		case porcupine.Unknown:
			t.Fatalf("seed %d: porcupine gave up on a history of %d operations", cfg.Seed, n)
		}
	}
	t.Logf("%d histories, %d operations, all linearizable", histories, total)
}
