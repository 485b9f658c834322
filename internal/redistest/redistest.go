// Package redistest provides what the tests and benchmarks of redislimit
// (its lease mode included), hotlimitd and bench/redisbench need to run
// against real Redis servers: the addresses of the private server and Cluster that
// servers.sh starts, clients configured as redislimit.New
// requires, key prefixes no other test uses, a command counter, private
// servers and Clusters a test starts and kills itself, and a TCP proxy
// that cuts connections.
//
// Every function that takes a testing.TB skips the test when the
// environment holds no server address (outside servers.sh), and
// cleans up what it made when the test ends.
package redistest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The environment variables that hold the addresses of the server and of
// the Cluster's masters (comma-separated); servers.sh starts both
// and sets them.
const (
	AddrEnv    = "HOTLIMIT_REDIS_ADDR"
	ClusterEnv = "HOTLIMIT_REDIS_CLUSTER"
)

// Addr returns the test server's address, or skips the test.
func Addr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(AddrEnv)
	if addr == "" {
		t.Skipf("%s is not set: source servers.sh (beside this package), as every module's test.sh does, to start a private redis-server", AddrEnv)
	}
	return addr
}

// ClusterAddrs returns the test Cluster's master addresses, or skips the
// test.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	addrs := os.Getenv(ClusterEnv)
	if addrs == "" {
		t.Skipf("%s is not set: source servers.sh (beside this package), as every module's test.sh does, to start a private Redis Cluster", ClusterEnv)
	}
	return strings.Split(addrs, ",")
}

// Client returns a client for addr configured as redislimit.New requires
// (no retries, context deadlines applied), closed when the test ends.
func Client(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: 16, Protocol: 2, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// ClusterClient returns a cluster client for addrs configured as
// redislimit.New requires (also MaxRedirects: -1), closed when the test
// ends.
func ClusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: 8, Protocol: 2, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

var seq atomic.Int64

// Prefix returns a key prefix (or a limiter name: it holds no brace) that
// no other test, and no other run, uses.
func Prefix(t testing.TB) string {
	return fmt.Sprintf("t:%s:%d:%d:", strings.NewReplacer("{", "(", "}", ")").Replace(t.Name()), time.Now().UnixNano(), seq.Add(1))
}

// Counter is a go-redis hook that counts the commands a client sends,
// those of a pipeline one by one: the round trips of a limiter that never
// pipelines. Install it with AddHook.
type Counter struct{ n atomic.Int64 }

// N returns the commands counted so far.
func (c *Counter) N() int64 { return c.n.Load() }

// DialHook implements redis.Hook.
func (c *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (c *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (c *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// ephemeralLow is the first port of the machine's ephemeral range, from
// which outgoing connections take their local ports.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				return n
			}
		}
	}
	return 32768
}

func free(port int) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// FreePort returns a loopback port that nothing listens on, whose cluster
// bus port (port + 10000) is free too. Both are below the ephemeral
// range, so that no outgoing connection takes them between now and the
// moment a server binds them, nor while a killed server is down.
func FreePort(t testing.TB) int {
	t.Helper()
	top := ephemeralLow() - 10001
	lo := max(1024, top-5000)
	for range 1000 {
		p := lo + rand.IntN(top-lo+1)
		if free(p) && free(p+10000) {
			return p
		}
	}
	t.Fatal("redistest: no free loopback port pair below the ephemeral range")
	return 0
}

// Server is a private redis-server a test starts, kills and restarts.
type Server struct {
	Port int

	t     testing.TB
	cmd   *exec.Cmd
	extra []string
}

// StartServer starts a redis-server on port (a free one if 0), without
// persistence, and waits until it answers; it is killed when the test
// ends. It skips the test where servers.sh is not running it, or
// where redis-server is not installed. The server that answers must be
// the one it started (INFO's process_id): a free port can be taken by
// another test's server before this one binds it, and this one then
// exits while the other answers in its place. Such a port chosen here is
// given up for another one; a port the caller gave fails the test.
func StartServer(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	Addr(t) // the tests that start servers run where test.sh runs
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	for range 5 {
		p := port
		if p == 0 {
			p = FreePort(t)
		}
		if s := startOn(t, bin, p, extra); s != nil {
			return s
		}
		if port != 0 {
			t.Fatalf("redistest: port %d answers for another redis-server than the one started on it", port)
		}
	}
	t.Fatal("redistest: 5 free ports in a row were taken by other redis-servers")
	return nil
}

// startOn starts a redis-server on port and waits until a server answers
// there: it returns the Server if that one is it, else kills it and
// returns nil.
func startOn(t testing.TB, bin string, port int, extra []string) *Server {
	t.Helper()
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Port: port, t: t, cmd: cmd, extra: extra}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	var info string
	var err error
	for {
		if info, err = c.Info(context.Background(), "server").Result(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			s.Stop()
			t.Fatalf("redis-server on port %d did not answer", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(info, "\nprocess_id:"+strconv.Itoa(cmd.Process.Pid)+"\r") {
		s.Stop()
		return nil
	}
	t.Cleanup(s.Stop)
	return s
}

// Addr returns the server's address.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Stop kills the server (as a crash would) and waits for it to exit.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// StartCluster starts n redis-servers in cluster mode, makes them one
// Cluster of n masters with redis-cli, and waits until every node says
// cluster_state:ok. They are killed when the test ends.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	Addr(t)
	dir := t.TempDir()
	var srvs []*Server
	var addrs []string
	for range n {
		port := FreePort(t)
		srvs = append(srvs, StartServer(t, port, "--cluster-enabled", "yes", "--dir", dir,
			"--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"))
		addrs = append(addrs, srvs[len(srvs)-1].Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := context.Background()
	for _, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
		WaitFor(t, "cluster_state:ok", func() bool {
			info, _ := c.ClusterInfo(ctx).Result()
			return strings.Contains(info, "cluster_state:ok")
		})
		c.Close()
	}
	return srvs
}

// WaitFor polls cond until it holds, failing the test after 10s. It
// waits for an outside process (a server starting, a Cluster agreeing),
// never to order the test's own goroutines.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CommandMicros returns the server's total time so far in the commands
// named (lower case, as INFO commandstats names them: "evalsha", "eval"),
// in µs. The server must serve nothing else meanwhile for a difference of
// two readings to mean anything.
func CommandMicros(tb testing.TB, c *redis.Client, names ...string) float64 {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		// cmdstat_evalsha:calls=3,usec=52,usec_per_call=17.33,...
		name, stats, _ := strings.Cut(strings.TrimSpace(line), ":")
		cmd, ok := strings.CutPrefix(name, "cmdstat_")
		if !ok || !contains(names, cmd) {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					tb.Fatal(err)
				}
				total += us
			}
		}
	}
	return total
}

// ServerCPU returns the server's CPU time so far (used_cpu_sys +
// used_cpu_user of INFO cpu), in µs.
func ServerCPU(tb testing.TB, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		name, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		if name == "used_cpu_sys" || name == "used_cpu_user" {
			s, err := strconv.ParseFloat(v, 64)
			if err != nil {
				tb.Fatal(err)
			}
			total += s * 1e6
		}
	}
	return total
}

func contains(names []string, s string) bool {
	for _, n := range names {
		if n == s {
			return true
		}
	}
	return false
}
