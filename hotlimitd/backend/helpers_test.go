package backend

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// frozen is a token bucket of burst n whose first unit comes back a day
// after it was taken: no test here lasts long enough for one to refill,
// so n is exactly what a key admits, on any schedule.
func frozen(n int64) hotlimit.Policy {
	return hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 24 * time.Hour}, Burst: n}
}

// inCI reports whether the tests run in CI, where the Redis tests must
// run: hotlimitd/test.sh starts the servers they need.
func inCI() bool { return os.Getenv("CI") == "true" }

// redisAddr returns the test server's address; it skips the test when
// there is none, except in CI, where it fails it.
func redisAddr(t *testing.T) string {
	t.Helper()
	if os.Getenv(redistest.AddrEnv) == "" && inCI() {
		t.Fatalf("%s is not set in CI: run hotlimitd/test.sh, which starts a private redis-server", redistest.AddrEnv)
	}
	return redistest.Addr(t)
}

// clusterAddrs is redisAddr for the test Redis Cluster.
func clusterAddrs(t *testing.T) []string {
	t.Helper()
	if os.Getenv(redistest.ClusterEnv) == "" && inCI() {
		t.Fatalf("%s is not set in CI: run hotlimitd/test.sh, which starts a private Redis Cluster", redistest.ClusterEnv)
	}
	return redistest.ClusterAddrs(t)
}

// open is Open that fails the test on error and closes the store when
// the test ends.
func open(t *testing.T, o Options, limits map[string]hotlimit.Policy) *Store {
	t.Helper()
	s, err := Open(context.Background(), o, limits)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// hammer runs workers goroutines on each store, each deciding calls of
// layers until it has made tries decisions, and returns how many were
// admitted. Errors other than refusals fail the test, unless tolerate
// says they may happen (a layer of a limit an Update dropped).
func hammer(t *testing.T, stores []*Store, workers, tries int, layers []admission.Layer, tolerate func(error) bool) int64 {
	t.Helper()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for _, s := range stores {
		for range workers {
			wg.Go(func() {
				states := make([]hotlimit.LayerState, len(layers))
				for range tries {
					d, _, err := s.AllowStates(context.Background(), layers, states)
					if err != nil {
						if tolerate != nil && tolerate(err) {
							continue
						}
						select {
						case errs <- err:
						default:
						}
						return
					}
					if d.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return admitted.Load()
}
