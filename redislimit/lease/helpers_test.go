package lease

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/redislimit/redistest"
	"github.com/redis/go-redis/v9"
)

// epoch is the script's instant (µs) when a test's clock reads 0.
const epoch = 1_700_000_000_000_000

// instance returns a Limiter on its own client whose script decides at
// the test clock's instant.
func instance(t testing.TB, addr, name string, p hotlimit.Policy, clk *hotlimit.ManualClock, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(redistest.Client(t, addr), name, p, append([]Option{WithClock(clk), WithTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	l.testNow = func() int64 { return epoch + int64(clk.Now()/time.Microsecond) }
	return l
}

// held returns the units l holds unspent and spendable for key now.
func (l *Limiter) held(key string) int64 {
	e := l.lookup(key)
	if e == nil {
		return 0
	}
	g := e.cur.Load()
	if g.end != never && l.clock.Now() >= time.Duration(g.end) {
		return 0
	}
	return g.avail.Load()
}

// proxy forwards loopback TCP to a Redis server until cut.
type proxy struct {
	ln    net.Listener
	to    string
	down  atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func newProxy(t testing.TB, to string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.down.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { io.Copy(s, c); s.Close() }()
		go func() { io.Copy(c, s); c.Close() }()
	}
}

// cut closes every connection and refuses new ones until restore.
func (p *proxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
}

func (p *proxy) restore() { p.down.Store(false) }

// windowCount reads the fixed window's stored count for key in window k.
func windowCount(t testing.TB, c *redis.Client, l *Limiter, key string, k int64) int64 {
	t.Helper()
	v, err := c.Get(context.Background(), l.RedisKey(key)).Result()
	if err == redis.Nil {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var sk, p, q int64
	if _, err := fmt.Sscanf(v, "%d %d %d", &sk, &p, &q); err != nil {
		t.Fatalf("state %q: %v", v, err)
	}
	if sk != k {
		return 0
	}
	return q
}
