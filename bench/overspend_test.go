package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Overspend: a bucket of 100 with negligible refill (1 per hour) must admit
// at most 100 calls however many goroutines race on it. A check-then-act
// race shows up as a trial that admitted more.
const (
	overspendBurst      = 100
	overspendGoroutines = 8
	overspendCalls      = 10_000 // per goroutine
	overspendTrials     = 50
	overspendTrialsCI   = 5 // under -short
)

// overspendTrialCount reads HOTLIMIT_OVERSPEND_TRIALS, else 50 (5 under
// -short).
func overspendTrialCount(t *testing.T) int {
	if s := os.Getenv("HOTLIMIT_OVERSPEND_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("HOTLIMIT_OVERSPEND_TRIALS=%q: want a positive integer", s)
		}
		return n
	}
	if testing.Short() {
		return overspendTrialsCI
	}
	return overspendTrials
}

// isHotlimit reports whether an implementation is hotlimit's own: only its
// overspend fails the test; a peer's is a finding.
func isHotlimit(name string) bool { return strings.HasPrefix(name, "hotlimit") }

type overspendResult struct {
	name       string
	min, max   int
	overspent  int // trials that admitted more than the burst
	underspent int // trials that admitted fewer (not a safety problem)
}

// overspendTrial runs one trial on a fresh limiter and a fresh key and
// returns how many calls were admitted.
func overspendTrial(im impl) int {
	k, stop := im.make(policy{Rate: 1.0 / 3600, Burst: overspendBurst})
	defer stop()
	const key = "user:overspend"
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		total int
	)
	for g := 0; g < overspendGoroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			n := 0
			for i := 0; i < overspendCalls; i++ {
				if k.Allow(key) {
					n++
				}
			}
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return total
}

func TestOverspend(t *testing.T) {
	trials := overspendTrialCount(t)
	var results []overspendResult
	for _, im := range keyedImpls() {
		r := overspendResult{name: im.name, min: -1}
		for i := 0; i < trials; i++ {
			n := overspendTrial(im)
			if r.min < 0 || n < r.min {
				r.min = n
			}
			if n > r.max {
				r.max = n
			}
			if n > overspendBurst {
				r.overspent++
			}
			if n < overspendBurst {
				r.underspent++
			}
		}
		results = append(results, r)
	}

	var sb strings.Builder
	fmt.Fprintf(&sb, "burst %d, 1/hour, %d goroutines x %d calls on one fresh key, %d trials\n",
		overspendBurst, overspendGoroutines, overspendCalls, trials)
	fmt.Fprintf(&sb, "%-24s %8s %8s %10s %11s\n", "impl", "min", "max", "overspent", "underspent")
	for _, r := range results {
		fmt.Fprintf(&sb, "%-24s %8d %8d %7d/%-3d %8d/%-3d\n",
			r.name, r.min, r.max, r.overspent, trials, r.underspent, trials)
	}
	t.Logf("\n%s", sb.String())

	for _, r := range results {
		if isHotlimit(r.name) && r.overspent > 0 {
			t.Errorf("%s admitted up to %d of a burst of %d (%d/%d trials overspent)",
				r.name, r.max, overspendBurst, r.overspent, trials)
		}
	}
}

// TestAdapters checks each adapter against its policy mapping: a fresh
// bucket admits its first call under both policies; under the deny policy
// the second call is denied; under the allow policy a short run is all
// admitted.
func TestAdapters(t *testing.T) {
	for _, im := range allImpls() {
		t.Run(im.name, func(t *testing.T) {
			k, stop := im.make(allowAll)
			defer stop()
			for i := 0; i < 1000; i++ {
				if !k.Allow(oneKey) {
					t.Fatalf("allow policy: call %d denied", i)
				}
			}
			if !im.canDeny {
				return
			}
			d, stopD := im.make(denyAll)
			defer stopD()
			if !d.Allow(oneKey) {
				t.Fatal("deny policy: first call on a fresh bucket denied")
			}
			if d.Allow(oneKey) {
				t.Fatal("deny policy: second call admitted")
			}
			if im.keyedOK && !d.Allow("user:other") {
				t.Fatal("deny policy: a different key shares the spent bucket")
			}
		})
	}
}
