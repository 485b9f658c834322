package redislimit

import (
	"context"
	"fmt"
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

// addrEnv names the environment variable that holds the address of the
// Redis server the tests use; test.sh starts a private one and sets it.
const addrEnv = "HOTLIMIT_REDIS_ADDR"

// serverAddr returns the test server's address, or skips the test.
func serverAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(addrEnv)
	if addr == "" {
		t.Skipf("%s is not set: run redislimit/test.sh, which starts a private redis-server", addrEnv)
	}
	return addr
}

// newClient returns a client for addr configured as New requires.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: 16, Protocol: 2, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

var prefixSeq atomic.Int64

// testPrefix returns a key prefix no other test (or run) uses.
func testPrefix(t testing.TB) string {
	return fmt.Sprintf("t:%s:%d:%d:", t.Name(), time.Now().UnixNano(), prefixSeq.Add(1))
}

// counter is a go-redis hook that counts the commands sent, pipelines
// counted per command: the round trips, since the limiter never pipelines.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// must returns v, panicking (which fails the test) on err.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// freePort returns a loopback port nothing listens on right now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// redisServer is a private redis-server a fault test starts and stops.
type redisServer struct {
	t     testing.TB
	port  int
	cmd   *exec.Cmd
	extra []string // arguments beyond the defaults
}

// startRedis starts a redis-server on port (a free one if 0) and waits
// until it answers; the test's cleanup stops it.
func startRedis(t testing.TB, port int, extra ...string) *redisServer {
	t.Helper()
	serverAddr(t) // the fault tests run where test.sh runs
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	if port == 0 {
		port = freePort(t)
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &redisServer{t: t, port: port, cmd: cmd, extra: extra}
	t.Cleanup(s.stop)
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %d did not answer", port)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

func (s *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// stop kills the server (as a crash would) and waits for it to exit.
func (s *redisServer) stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// clusterEnv names the environment variable that holds the addresses of
// the Redis Cluster the tests use (comma-separated masters); test.sh
// starts a private 3-master cluster and sets it.
const clusterEnv = "HOTLIMIT_REDIS_CLUSTER"

// clusterAddrs returns the test cluster's addresses, or skips the test.
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	addrs := os.Getenv(clusterEnv)
	if addrs == "" {
		t.Skipf("%s is not set: run redislimit/test.sh, which starts a private Redis Cluster", clusterEnv)
	}
	return strings.Split(addrs, ",")
}

// newClusterClient returns a cluster client for addrs configured as New
// requires.
func newClusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true,
		DialTimeout: time.Second, PoolSize: 8, Protocol: 2, DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// startCluster starts n redis-servers in cluster mode on free ports, makes
// them one cluster of n masters with redis-cli, and waits until every node
// says cluster_state:ok. The test's cleanup stops them.
func startCluster(t testing.TB, n int) []*redisServer {
	t.Helper()
	serverAddr(t)
	dir := t.TempDir()
	var srvs []*redisServer
	var addrs []string
	for range n {
		port := freeClusterPort(t)
		srvs = append(srvs, startRedis(t, port, "--cluster-enabled", "yes", "--dir", dir,
			"--cluster-config-file", "nodes-"+strconv.Itoa(port)+".conf",
			"--cluster-node-timeout", "2000", "--cluster-require-full-coverage", "no"))
		addrs = append(addrs, srvs[len(srvs)-1].addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	ctx := context.Background()
	for _, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
		waitFor(t, "cluster_state:ok", func() bool {
			info, _ := c.ClusterInfo(ctx).Result()
			return strings.Contains(info, "cluster_state:ok")
		})
		c.Close()
	}
	return srvs
}

// freeClusterPort returns a free loopback port whose cluster bus port
// (port + 10000) is free too.
func freeClusterPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := freePort(t)
		if p+10000 > 65535 {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

// nodeOf returns the address of the cluster master that serves key.
func nodeOf(t testing.TB, c *redis.ClusterClient, key string) string {
	t.Helper()
	m, err := c.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return m.Options().Addr
}
