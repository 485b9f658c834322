package redislimit

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// epoch is the script's instant (µs) when a test's clock reads 0.
const epoch = 1_700_000_000_000_000

// instance returns a Limiter in lease mode (WithLeases(0, 0) unless opts
// give another) on its own client, with a 2s timeout, whose leases expire
// by clk and whose scripts decide at clk's instant.
func instance(t testing.TB, addr, name string, p hotlimit.Policy, clk *hotlimit.ManualClock, opts ...Option) *Limiter {
	t.Helper()
	return leased(t, redistest.Client(t, addr), name, p, clk, opts...)
}

// leased is instance on client.
func leased(t testing.TB, client redis.Scripter, name string, p hotlimit.Policy, clk *hotlimit.ManualClock, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(client, name, p, append([]Option{WithTimeout(2 * time.Second), WithLeases(0, 0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	onClock(l, clk)
	return l
}

// onClock makes l's leases expire by clk and its scripts decide at clk's
// instant; it returns l.
func onClock(l *Limiter, clk *hotlimit.ManualClock) *Limiter {
	l.leases.clock = clk
	l.testNow = func() int64 { return epoch + int64(clk.Now()/time.Microsecond) }
	return l
}

// admit is AllowN's Allowed and error: what most lease tests read of a
// decision.
func admit(l *Limiter, ctx context.Context, key string, cost int64) (bool, error) {
	d, err := l.AllowN(ctx, key, cost)
	return d.Allowed, err
}

// held returns the units l's lease holds unspent and spendable for key
// now.
func (l *Limiter) held(key string) int64 {
	e := l.leases.lookup(key)
	if e == nil {
		return 0
	}
	g := e.cur.Load()
	if g.end != never && l.leases.clock.Now() >= time.Duration(g.end) {
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
	sk, _, q, ok := windowState(v)
	if !ok {
		t.Fatalf("state %q: no window state", v)
	}
	if sk != k {
		return 0
	}
	return q
}

// windowState reads a window state as start.lua's windowState does: the
// packed integer -((k+1)·2^21 + q) or the string "k p q".
func windowState(v string) (k, p, q int64, ok bool) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n >= 0 || -n>>21 < 1 {
			return 0, 0, 0, false
		}
		return -n>>21 - 1, 0, -n & (1<<21 - 1), true
	}
	if _, err := fmt.Sscanf(v, "%d %d %d", &k, &p, &q); err != nil {
		return 0, 0, 0, false
	}
	return k, p, q, true
}
