package hotlimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestRenewalsUnderRebuildsExact: at one frozen instant, 6 goroutines
// admit on 3 keys of one shard and give back a random one of the up to 4
// Admissions each holds (most below later admissions: renewals), each
// give-back made by two goroutines at once (exactly one Refund spends
// it), while another goroutine switches the Burst with SetPolicy (a
// conversion rebuilds the table), inserts and resets decoy keys (the
// table grows and is purged of tombstones), and sweeps. Once all have
// returned, each key's kept units plus its Remaining are exactly the
// Limit: no renewal lost a unit or gave one twice across the rebuilds.
func TestRenewalsUnderRebuildsExact(t *testing.T) {
	for name, pp := range map[string][2]hotlimit.Policy{
		"TokenBucket": {hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 200}, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 150}},
		"LeakyBucket": {hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 199}, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 149}},
	} {
		t.Run(name, func(t *testing.T) {
			rounds := 10
			if raceEnabled {
				rounds = 3
			}
			for round := range rounds {
				l, c := newManual(t, pp[0], hotlimit.WithShards(1))
				c.Set(time.Hour + 7*time.Millisecond)
				keys := []string{"k0", "k1", "a-key-longer-than-15-bytes"}
				var kept [3]atomic.Int64
				var workers sync.WaitGroup
				stop := make(chan struct{})
				var disturber sync.WaitGroup
				disturber.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := l.SetPolicy(pp[i%2]); err != nil {
							t.Error(err)
						}
						for j := range 40 {
							l.Allow(fmt.Sprint("decoy-", i, "-", j))
						}
						for j := range 40 {
							l.Reset(fmt.Sprint("decoy-", i, "-", j))
						}
						l.Sweep()
					}
				})
				for g := range 6 {
					workers.Go(func() {
						r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
						type held struct {
							a    *hotlimit.Admission
							k    int
							cost int64
						}
						var hs []held
						for range 300 {
							if len(hs) < 4 {
								k := r.IntN(len(keys))
								a, cost := new(hotlimit.Admission), 1+r.Int64N(2)
								if l.AdmitN(a, keys[k], cost).Allowed {
									hs = append(hs, held{a, k, cost})
								}
								continue
							}
							i := r.IntN(len(hs))
							h := hs[i]
							hs = slices.Delete(hs, i, i+1)
							if r.IntN(40) == 0 && kept[h.k].Load() < 40 {
								kept[h.k].Add(h.cost)
								continue
							}
							var spent atomic.Int32
							inParallel(2, func(int) {
								if h.a.Refund() {
									spent.Add(1)
								}
							})
							if n := spent.Load(); n != 1 {
								t.Errorf("two concurrent Refunds of one Admission spent it %d times", n)
							}
						}
						for _, h := range hs {
							h.a.Refund()
						}
					})
				}
				workers.Wait()
				close(stop)
				disturber.Wait()
				if err := l.SetPolicy(pp[0]); err != nil {
					t.Fatal(err)
				}
				for k, key := range keys {
					if n, left := kept[k].Load(), l.Check(key, 0).Remaining; n+left != l.Limit() {
						t.Errorf("round %d, %q: %d units kept and %d left, want %d in all (%+v)", round, key, n, left, l.Limit(), l.Stats())
					}
				}
			}
		})
	}
}
