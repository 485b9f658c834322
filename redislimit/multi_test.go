package redislimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestMultiInstance: several limiter instances, each with its own client
// (its own connections), hammer one key concurrently; the total admitted
// across them is exactly the policy's. Each instance's application clock
// (the two-tier cache's, the only clock redislimit reads in process) is
// skewed by up to ±5s: decisions use the server's TIME, so totals do not
// move. Half the instances run the two-tier mode, half go to Redis for
// every request. Rates are slow enough that nothing refills during the test.
func TestMultiInstance(t *testing.T) {
	addr := redistest.Addr(t)
	policies := []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 24 * time.Hour}, Burst: 40},
		hotlimit.SlidingWindow{Limit: 40, Window: 24 * time.Hour},
	}
	skews := []time.Duration{-5 * time.Second, 0, 5 * time.Second, 3 * time.Second}
	for _, policy := range policies {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			prefix := redistest.Prefix(t)
			var admitted, denied, errs atomic.Int64
			var wg sync.WaitGroup
			for i, skew := range skews {
				l := must(New(redistest.Client(t, addr), "multi", policy, WithPrefix(prefix), WithLocalDenials(100), WithTimeout(5*time.Second)))
				l.cache.now = func() time.Duration { return monoNow() + skew }
				if i%2 == 1 {
					l.cache = nil // every request of this instance goes to Redis
				}
				for range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 30 {
							d, err := l.Allow(context.Background(), "shared")
							switch {
							case err != nil:
								errs.Add(1)
							case d.Allowed:
								admitted.Add(1)
							default:
								denied.Add(1)
							}
						}
					}()
				}
			}
			wg.Wait()
			if errs.Load() != 0 {
				t.Fatalf("%d calls failed", errs.Load())
			}
			if admitted.Load() != 40 || denied.Load() != 4*3*30-40 {
				t.Fatalf("admitted %d, denied %d across 4 instances; want exactly 40 admitted", admitted.Load(), denied.Load())
			}
		})
	}
}
