package redisbench

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// BenchmarkWindows is hotlimitd's call on Redis with its default
// algorithm: a RedisBackend of fixed windows (1,000 a second per key, as
// hotlimitd/internal/bench's configuration), asked by 32 or 64 goroutines
// at once (so that redislimit batches their decisions) for 1 or 3 layers
// a decision, each with its layers' states (hotlimitd's AllowStates),
// over 1,000 keys, nothing over the limit. It reports redis-server's CPU
// per decision (INFO cpu's used_cpu_user + used_cpu_sys: what the server
// did, reading and writing the sockets included), decisions per second,
// the server's time in scripts per decision (INFO commandstats) and the
// decisions per script call. The server must serve nothing else.
func BenchmarkWindows(b *testing.B) {
	for _, layers := range []int{1, 3} {
		for _, callers := range []int{32, 64} {
			b.Run(fmt.Sprintf("layers=%d/callers=%d", layers, callers), func(b *testing.B) {
				windows(b, layers, callers)
			})
		}
	}
}

func windows(b *testing.B, layers, callers int) {
	addr := redistest.Addr(b)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: callers, Protocol: 2, DisableIdentity: true})
	b.Cleanup(func() { c.Close() })
	n := &redistest.Counter{}
	c.AddHook(n)
	rb := windowsBackend(b, c, layers)
	const nk = 1000
	decide := func(ctx context.Context, i int, ls []admission.Layer, st []hotlimit.LayerState) {
		k := "k" + strconv.Itoa(i%nk)
		for j := range ls {
			ls[j] = admission.Layer{Limit: "d" + strconv.Itoa(j), Key: k, Cost: 1}
		}
		d, _, err := rb.AllowStates(ctx, ls, st)
		if err != nil {
			b.Error(err)
		} else if !d.Allowed {
			b.Error("denied")
		}
	}
	ctx := context.Background()
	decide(ctx, 0, make([]admission.Layer, layers), make([]hotlimit.LayerState, layers)) // loads the script
	cpu0, us0, rt0 := redistest.ServerCPU(b, c), scriptMicros(b, c), n.N()
	var next atomic.Int64
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		ls, st := make([]admission.Layer, layers), make([]hotlimit.LayerState, layers)
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			decide(ctx, i, ls, st)
			i++
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	rt := n.N() - rt0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric((redistest.ServerCPU(b, c)-cpu0)/float64(b.N), "server-cpu-µs/op")
	b.ReportMetric((scriptMicros(b, c)-us0)/float64(b.N), "script-µs/op")
	b.ReportMetric(float64(b.N)/float64(rt), "decisions/call")
}

// windowsBackend returns BenchmarkWindows' backend on c: layers limits
// "d0", "d1", … of fixed windows of 1,000 a second (hotlimitd's bench
// configuration), closed when b ends.
func windowsBackend(b *testing.B, c *redis.Client, layers int) *redislimit.RedisBackend {
	limits := map[string]hotlimit.Policy{}
	for i := range layers {
		limits["d"+strconv.Itoa(i)] = hotlimit.FixedWindow{Limit: 1000, Window: time.Second}
	}
	rb, err := redislimit.NewBackend(c, limits, redislimit.WithPrefix(prefix(b)), redislimit.WithTimeout(5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rb.Close() })
	return rb
}
