package redisbench

import (
	"context"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/redis/go-redis/v9"
)

// client returns a client of the server redislimit/test.sh started (its
// address in HOTLIMIT_REDIS_ADDR; the benchmark is skipped without it),
// with a counter of the commands it sends: its round trips, since no
// limiter here pipelines.
func client(b *testing.B) (*redis.Client, *redistest.Counter) {
	addr := redistest.Addr(b)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	b.Cleanup(func() { c.Close() })
	n := &redistest.Counter{}
	c.AddHook(n)
	return c, n
}

// decider is one limiter under test: it decides one request for key and
// reports whether it was admitted.
type decider func(ctx context.Context, key string) bool

const nKeys = 1024

var keys = func() []string {
	ks := make([]string, nKeys)
	for i := range ks {
		ks[i] = "user:" + strconv.Itoa(i)
	}
	return ks
}()

// run measures d serially or in parallel over nKeys keys (one key when
// hot), and reports round trips per decision and the server's time in
// scripts per decision (script-µs/op, from INFO commandstats: the part of
// a decision the script costs, less sensitive than ns/op to the load of a
// shared client machine).
func run(b *testing.B, c *redis.Client, n *redistest.Counter, parallel, hot bool, d decider) {
	ctx := context.Background()
	keyOf := func(i int) string {
		if hot {
			return "abuser"
		}
		return keys[i%nKeys]
	}
	d(ctx, keyOf(0)) // loads scripts
	us0 := scriptMicros(b, c)
	start := n.N()
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				d(ctx, keyOf(i))
				i++
			}
		})
	} else {
		for i := 0; b.Loop(); i++ {
			d(ctx, keyOf(i))
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n.N()-start)/float64(b.N), "roundtrips/op")
	b.ReportMetric((scriptMicros(b, c)-us0)/float64(b.N), "script-µs/op")
}

// scriptMicros returns the server's total time in EVAL and EVALSHA so far,
// in µs. The server must serve nothing else while benchmarks run.
func scriptMicros(b *testing.B, c *redis.Client) float64 {
	return redistest.CommandMicros(b, c, "evalsha", "eval")
}

// A generous token bucket: every decision admits, so each one writes.
var (
	generous     = hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1_000_000, Per: time.Second}, Burst: 1_000_000}
	generousRate = redis_rate.Limit{Rate: 1_000_000, Period: time.Second, Burst: 1_000_000}
	// A strict one: after the first request of a key, every one is denied.
	strict     = hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Hour}, Burst: 1}
	strictRate = redis_rate.Limit{Rate: 1, Period: time.Hour, Burst: 1}
)

func prefix(b *testing.B) string {
	return "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
}

func hotlimitRedis(b *testing.B, c redis.Scripter, policy hotlimit.Policy, opts ...redislimit.Option) decider {
	l, err := redislimit.New(c, "b", policy, append([]redislimit.Option{redislimit.WithPrefix(prefix(b)), redislimit.WithTimeout(time.Second)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	return func(ctx context.Context, key string) bool {
		d, err := l.Allow(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		return d.Allowed
	}
}

// redisRate decides with redis_rate; with timeout, each call gets its own
// deadline as redislimit's do (WithTimeout), so that the two pay for the
// same timer and connection deadline.
func redisRate(b *testing.B, c redis.UniversalClient, limit redis_rate.Limit, timeout time.Duration) decider {
	l := redis_rate.NewLimiter(c)
	p := prefix(b)
	return func(ctx context.Context, key string) bool {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		r, err := l.Allow(ctx, p+key, limit)
		if err != nil {
			b.Fatal(err)
		}
		return r.Allowed > 0
	}
}

// BenchmarkAllowed: every decision admits (and writes), over 1024 keys.
func BenchmarkAllowed(b *testing.B) {
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("redislimit/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, false, hotlimitRedis(b, c, generous))
		})
		b.Run("redis_rate/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, false, redisRate(b, c, generousRate, 0))
		})
		b.Run("redis_rate-timeout/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, false, redisRate(b, c, generousRate, time.Second))
		})
	}
}

// BenchmarkAbusive: one key over its limit, every request denied. The
// two-tier mode answers all but the first in process.
func BenchmarkAbusive(b *testing.B) {
	for _, mode := range []struct {
		name     string
		parallel bool
	}{{"serial", false}, {"parallel", true}} {
		b.Run("redislimit/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, true, hotlimitRedis(b, c, strict))
		})
		b.Run("redislimit-twotier/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, true, hotlimitRedis(b, c, strict, redislimit.WithLocalDenials(10_000)))
		})
		b.Run("redis_rate/"+mode.name, func(b *testing.B) {
			c, n := client(b)
			run(b, c, n, mode.parallel, true, redisRate(b, c, strictRate, 0))
		})
	}
}

// BenchmarkLayers: three layers (per user, per IP, global) in one call.
// redis_rate has no layered call: three calls, each consuming on its own.
func BenchmarkLayers(b *testing.B) {
	b.Run("redislimit", func(b *testing.B) {
		c, n := client(b)
		p := prefix(b)
		mk := func(name string) *redislimit.Limiter {
			l, err := redislimit.New(c, name, generous, redislimit.WithPrefix(p))
			if err != nil {
				b.Fatal(err)
			}
			return l
		}
		user, ip, global := mk("user"), mk("ip"), mk("global")
		run(b, c, n, false, false, func(ctx context.Context, key string) bool {
			d, err := redislimit.AllowLayers(ctx,
				redislimit.Layer{Limiter: user, Key: key, Cost: 1},
				redislimit.Layer{Limiter: ip, Key: "10.0.0.1", Cost: 1},
				redislimit.Layer{Limiter: global, Key: "", Cost: 1})
			if err != nil {
				b.Fatal(err)
			}
			return d.Allowed
		})
	})
	b.Run("redis_rate-3calls", func(b *testing.B) {
		c, n := client(b)
		l := redis_rate.NewLimiter(c)
		p := prefix(b)
		run(b, c, n, false, false, func(ctx context.Context, key string) bool {
			ok := true
			for _, k := range []string{"user:" + key, "ip:10.0.0.1", "global"} {
				r, err := l.Allow(ctx, p+k, generousRate)
				if err != nil {
					b.Fatal(err)
				}
				ok = ok && r.Allowed > 0
			}
			return ok
		})
	})
}

// paired times d and a PING alternately on the same client, serially,
// and reports the median of each (µs) and the ratio of the medians: on a
// loaded machine the two see the same load, and medians ignore the stalls
// that dominate means.
func paired(b *testing.B, c *redis.Client, d decider) {
	ctx := context.Background()
	d(ctx, keys[0]) // loads scripts
	pings := make([]time.Duration, 0, b.N)
	ops := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		d(ctx, keys[i%nKeys])
		t2 := time.Now()
		pings, ops = append(pings, t1.Sub(t0)), append(ops, t2.Sub(t1))
	}
	b.StopTimer()
	mp, mo := median(pings), median(ops)
	b.ReportMetric(float64(mp)/1e3, "ping-µs")
	b.ReportMetric(float64(mo)/1e3, "op-µs")
	b.ReportMetric(float64(mo)/float64(mp), "×ping")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkVsPing puts a decision beside the cheapest round trip on the
// same client, serially on loopback: PING, then one decision of each
// policy (every one admitted, so each writes), three token-bucket layers
// in one call, and a concurrency permit taken and released (two round
// trips). The ratios to PING are what the package promises.
func BenchmarkVsPing(b *testing.B) {
	policies := []struct {
		name   string
		policy hotlimit.Policy
	}{
		{"token", generous},
		{"leaky", hotlimit.LeakyBucket{Rate: hotlimit.Rate{N: 1_000_000, Per: time.Second}, Capacity: 1_000_000}},
		{"fixed", hotlimit.FixedWindow{Limit: 1_000_000_000, Window: time.Hour}},
		{"sliding", hotlimit.SlidingWindow{Limit: 2_000_000, Window: time.Hour}},
		{"log", hotlimit.SlidingLog{Limit: 1024, Window: time.Millisecond}},
	}
	for _, p := range policies {
		b.Run(p.name, func(b *testing.B) {
			c, _ := client(b)
			paired(b, c, hotlimitRedis(b, c, p.policy))
		})
	}
	// The floor of any limiter that is one Lua script on the server's
	// clock: TIME, GET and SET, nothing decided.
	b.Run("lua-floor", func(b *testing.B) {
		c, _ := client(b)
		floor := redis.NewScript(`local t = redis.call("TIME")
local v = redis.call("GET", KEYS[1])
redis.call("SET", KEYS[1], t[1], "PX", 60000)
return {1, 2, 3}`)
		p := prefix(b)
		paired(b, c, func(ctx context.Context, key string) bool {
			if err := floor.Run(ctx, c, []string{p + key}).Err(); err != nil {
				b.Fatal(err)
			}
			return true
		})
	})
	b.Run("redis_rate", func(b *testing.B) {
		c, _ := client(b)
		paired(b, c, redisRate(b, c, generousRate, 0))
	})
	b.Run("layers3", func(b *testing.B) {
		c, _ := client(b)
		p := prefix(b)
		mk := func(name string) *redislimit.Limiter {
			l, err := redislimit.New(c, name, generous, redislimit.WithPrefix(p), redislimit.WithHashTag("t"))
			if err != nil {
				b.Fatal(err)
			}
			return l
		}
		user, ip, global := mk("user"), mk("ip"), mk("global")
		paired(b, c, func(ctx context.Context, key string) bool {
			d, err := redislimit.AllowLayers(ctx,
				redislimit.Layer{Limiter: user, Key: key, Cost: 1},
				redislimit.Layer{Limiter: ip, Key: "10.0.0.1", Cost: 1},
				redislimit.Layer{Limiter: global, Key: "", Cost: 1})
			if err != nil {
				b.Fatal(err)
			}
			return d.Allowed
		})
	})
	b.Run("concurrency", func(b *testing.B) {
		c, _ := client(b)
		cl, err := redislimit.NewConcurrency(c, "b", 1_000_000, time.Minute, redislimit.WithPrefix(prefix(b)), redislimit.WithTimeout(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		paired(b, c, func(ctx context.Context, key string) bool {
			p, ok, err := cl.TryAcquireN(ctx, key, 1)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if _, err := p.Release(ctx); err != nil {
				b.Fatal(err)
			}
			return true
		})
	})
}

// BenchmarkBackendStates: the cost of RedisBackend reporting each layer's
// state (AllowStates, for one RateLimit item per limit) against the
// binding layer only (AllowBinding), for two buckets (the script's fast
// path) and for a sliding window and a sliding log (its general path,
// where each layer's next unit is one more step of the script).
func BenchmarkBackendStates(b *testing.B) {
	for _, tc := range []struct {
		name       string
		user, glob hotlimit.Policy
	}{
		{"buckets", generous, generous},
		{"windows", hotlimit.SlidingWindow{Limit: 1_000_000, Window: time.Second}, hotlimit.SlidingLog{Limit: 1024, Window: time.Second}},
	} {
		for _, states := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/states=%v", tc.name, states), func(b *testing.B) {
				c, n := client(b)
				rb, err := redislimit.NewBackend(c, map[string]hotlimit.Policy{"user": tc.user, "global": tc.glob}, redislimit.WithPrefix(prefix(b)), redislimit.WithTimeout(5*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				var st []hotlimit.LayerState
				if states {
					st = make([]hotlimit.LayerState, 2)
				}
				run(b, c, n, false, false, func(ctx context.Context, key string) bool {
					ls := []admission.Layer{{Limit: "user", Key: key, Cost: 1}, {Limit: "global", Key: key, Cost: 1}}
					d, _, err := rb.AllowStates(ctx, ls, st)
					if err != nil {
						b.Fatal(err)
					}
					return d.Allowed
				})
			})
		}
	}
}

// callers is how many goroutines decide at once in BenchmarkThroughput.
const callers = 64

// BenchmarkThroughput: 64 goroutines decide at once on one client (a pool
// of 64 connections, so that none waits for a connection) over 1024 keys,
// every decision admitted (so each writes). It reports decisions per
// second, the server's CPU per decision (used_cpu_sys + used_cpu_user of
// INFO cpu: everything the server did, network included; proc-cpu-µs/op
// is the same read from /proc), the time the
// server spent in the script commands per decision (INFO commandstats)
// and round trips per decision. The server must serve nothing else
// meanwhile.
func BenchmarkThroughput(b *testing.B) {
	for _, tc := range []struct {
		name string
		mk   func(b *testing.B, c *redis.Client) decider
	}{
		{"redislimit", func(b *testing.B, c *redis.Client) decider { return hotlimitRedis(b, c, generous) }},
		{"redis_rate", func(b *testing.B, c *redis.Client) decider { return redisRate(b, c, generousRate, time.Second) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addr := redistest.Addr(b)
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: callers})
			b.Cleanup(func() { c.Close() })
			n := &redistest.Counter{}
			c.AddHook(n)
			d := tc.mk(b, c)
			ctx := context.Background()
			d(ctx, keys[0]) // loads the script
			proc := serverProcs(b, c)
			cpu0, us0, rt0, pcpu0 := redistest.ServerCPU(b, c), scriptMicros(b, c), n.N(), proc.cpu(b)
			elapsed := callersDecide(b, d)
			// The INFO calls after the loop are not decisions: they are
			// read before being counted.
			rt := n.N() - rt0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
			b.ReportMetric((redistest.ServerCPU(b, c)-cpu0)/float64(b.N), "server-cpu-µs/op")
			b.ReportMetric((proc.cpu(b)-pcpu0)/float64(b.N), "proc-cpu-µs/op")
			b.ReportMetric((scriptMicros(b, c)-us0)/float64(b.N), "script-µs/op")
			b.ReportMetric(float64(rt)/float64(b.N), "roundtrips/op")
		})
	}
}

// callersDecide runs b.N decisions of d from 64 goroutines at once (each
// starting at a key of its own) and returns how long they took, with the
// benchmark's timer stopped after them.
func callersDecide(b *testing.B, d decider) time.Duration {
	ctx := context.Background()
	var next atomic.Int64
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			d(ctx, keys[i%nKeys])
			i++
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	return elapsed
}

// procs are redis-server processes on this machine, whose CPU time /proc
// reports: the figure a loaded machine does not distort, as it counts
// only what the servers ran.
type procs []int

// serverProcs returns the processes of the servers behind clients (INFO
// server's process_id; each must run on this machine).
func serverProcs(b *testing.B, clients ...*redis.Client) procs {
	var ps procs
	for _, c := range clients {
		info, err := c.Info(context.Background(), "server").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
				pid, err := strconv.Atoi(v)
				if err != nil {
					b.Fatal(err)
				}
				ps = append(ps, pid)
			}
		}
	}
	if len(ps) != len(clients) {
		b.Fatalf("%d process ids for %d servers", len(ps), len(clients))
	}
	return ps
}

// cpu returns the processes' CPU time so far (user + system, every
// thread), in µs, at /proc's resolution of a clock tick (10 ms).
func (ps procs) cpu(b *testing.B) float64 {
	const ticksPerSecond = 100 // USER_HZ, fixed on Linux
	var total float64
	for _, pid := range ps {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			b.Fatal(err)
		}
		// After "pid (comm) ": state is field 3, utime 14, stime 15.
		_, rest, _ := strings.Cut(string(stat), ") ")
		f := strings.Fields(rest)
		if len(f) < 13 {
			b.Fatalf("/proc/%d/stat: %q", pid, stat)
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += n * 1e6 / ticksPerSecond
		}
	}
	return total
}

// BenchmarkThroughputCluster is BenchmarkThroughput on the 3-master Redis
// Cluster redislimit/test.sh starts (HOTLIMIT_REDIS_CLUSTER): 64
// goroutines decide at once through one cluster client (64 connections
// per node) over 1024 keys spread over the masters, every decision
// admitted. redislimit batches the decisions bound for each master;
// redis_rate makes one call per decision. It reports decisions per second,
// the masters' CPU per decision (their processes' user + system time from
// /proc, summed), and round trips per decision (the commands the nodes'
// clients sent).
func BenchmarkThroughputCluster(b *testing.B) {
	for _, tc := range []struct {
		name string
		mk   func(b *testing.B, c *redis.ClusterClient) decider
	}{
		{"redislimit", func(b *testing.B, c *redis.ClusterClient) decider { return hotlimitRedis(b, c, generous) }},
		{"redis_rate", func(b *testing.B, c *redis.ClusterClient) decider { return redisRate(b, c, generousRate, time.Second) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addrs := redistest.ClusterAddrs(b)
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true, PoolSize: callers})
			b.Cleanup(func() { c.Close() })
			n := &redistest.Counter{}
			c.OnNewNode(func(nc *redis.Client) { nc.AddHook(n) })
			ctx := context.Background()
			var masters []*redis.Client
			for _, a := range addrs {
				m := redis.NewClient(&redis.Options{Addr: a})
				b.Cleanup(func() { m.Close() })
				masters = append(masters, m)
			}
			proc := serverProcs(b, masters...)
			d := tc.mk(b, c)
			for _, k := range keys {
				d(ctx, k) // loads the script on every master, and the slot map
			}
			cpu0, rt0 := proc.cpu(b), n.N()
			elapsed := callersDecide(b, d)
			rt := n.N() - rt0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
			b.ReportMetric((proc.cpu(b)-cpu0)/float64(b.N), "proc-cpu-µs/op")
			b.ReportMetric(float64(rt)/float64(b.N), "roundtrips/op")
		})
	}
}
