package redislimit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
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
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

// startRedis starts a redis-server on port (a free one if 0) and waits
// until it answers; the test's cleanup stops it.
func startRedis(t testing.TB, port int) *redisServer {
	t.Helper()
	serverAddr(t) // the fault tests run where test.sh runs
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not installed")
	}
	if port == 0 {
		port = freePort(t)
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &redisServer{t: t, port: port, cmd: cmd}
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
