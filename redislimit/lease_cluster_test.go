package redislimit

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestCluster: on a Redis Cluster (HOTLIMIT_REDIS_CLUSTER, which
// redislimit/test.sh starts), three instances with four goroutines each
// spend 16 keys spread over the slots, time frozen: per key, what was
// admitted plus what the leases hold is exactly the limit.
func TestCluster(t *testing.T) {
	addrs := os.Getenv("HOTLIMIT_REDIS_CLUSTER")
	if addrs == "" {
		t.Skip("HOTLIMIT_REDIS_CLUSTER is not set: run redislimit/test.sh, which starts a private Redis Cluster")
	}
	name := redistest.Prefix(t)
	const limit, maxLease, nKeys = 100, 10, 16
	policy := hotlimit.FixedWindow{Limit: limit, Window: time.Second}
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	var ls []*Limiter
	for range 3 {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: strings.Split(addrs, ","), MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true,
			DialTimeout: time.Second, PoolSize: 8, Protocol: 2, DisableIdentity: true,
		})
		t.Cleanup(func() { c.Close() })
		ls = append(ls, leased(t, c, name, policy, clk, WithLeases(maxLease, 0)))
	}
	var admitted [nKeys]atomic.Int64
	var wg sync.WaitGroup
	for _, l := range ls {
		for g := range 4 {
			wg.Go(func() {
				for i := range 3 * limit {
					k := (i + g) % nKeys
					ok, err := admit(l, ctx, fmt.Sprint("user", k), 1)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						admitted[k].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range nKeys {
		key := fmt.Sprint("user", k)
		var held int64
		for _, l := range ls {
			l.leases.bg.Wait()
			held += l.held(key)
		}
		if n := admitted[k].Load(); n+held != limit {
			t.Errorf("key %s: admitted %d + held %d = %d, want the limit %d", key, n, held, n+held, limit)
		}
	}
}
