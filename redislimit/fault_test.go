package redislimit

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// slowProxy forwards loopback TCP connections to a Redis server, holding
// every chunk of bytes for delay in each direction.
type slowProxy struct {
	ln      net.Listener
	target  string
	delay   time.Duration
	pending atomic.Int64 // chunks read from a client, not yet written upstream
	wg      sync.WaitGroup
}

func newSlowProxy(t *testing.T, target string, delay time.Duration) *slowProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln, target: target, delay: delay}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

func (p *slowProxy) addr() string { return p.ln.Addr().String() }

func (p *slowProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.wg.Add(2)
		go p.pipe(c, up, true)
		go p.pipe(up, c, false)
	}
}

type chunk struct {
	at time.Time
	b  []byte
}

// pipe copies src to dst, each chunk delay after it was read; upstream
// chunks are counted in pending until written. dst is closed after the
// last chunk, so a client that gives up still has its bytes delivered.
func (p *slowProxy) pipe(src, dst net.Conn, upstream bool) {
	defer p.wg.Done()
	ch := make(chan chunk, 1024)
	go func() {
		for c := range ch {
			time.Sleep(time.Until(c.at.Add(p.delay)))
			dst.Write(c.b)
			if upstream {
				p.pending.Add(-1)
			}
		}
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if upstream {
				p.pending.Add(1)
			}
			ch <- chunk{time.Now(), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				src.Close()
			}
			close(ch)
			return
		}
	}
}

// slowBucket refills one unit a day: nothing refills during a test.
var slowBucket = hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 24 * time.Hour}, Burst: 100}

// TestFaultSlow: behind a proxy that delays every byte by 1s, each call
// fails after its 100ms timeout with the failure policy's answer; after 3
// failures the breaker opens and calls fail at once without sending
// anything. The timed-out calls did reach Redis: each consumed exactly
// once, never retried.
func TestFaultSlow(t *testing.T) {
	addr := redistest.Addr(t)
	proxy := newSlowProxy(t, addr, time.Second)
	slow := redistest.Client(t, proxy.addr())
	var sent redistest.Counter
	slow.AddHook(&sent)
	prefix := redistest.Prefix(t)
	l := must(New(slow, "slow", slowBucket, WithPrefix(prefix), WithTimeout(100*time.Millisecond),
		WithBreaker(NewBreaker(3, time.Hour))))
	direct := must(New(redistest.Client(t, addr), "slow", slowBucket, WithPrefix(prefix)))
	ctx := context.Background()
	// Load the script on the server first, so that each timed-out call is
	// one EVALSHA that runs.
	if d := must(direct.AllowN(ctx, "k", 0)); d.Remaining != 100 {
		t.Fatalf("fresh key: %+v", d)
	}
	// Open 3 connections through the proxy while nothing is in a hurry
	// (the connection handshake is slow too), so that each call below
	// takes an established one and does send its script.
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, 8*time.Second)
			defer cancel()
			if err := slow.Ping(pctx).Err(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := slow.PoolStats().IdleConns; n < 3 {
		t.Fatalf("%d idle connections through the proxy, want 3", n)
	}
	for i := range 3 {
		start := time.Now()
		d, err := l.Allow(ctx, "k")
		if took := time.Since(start); took > 900*time.Millisecond {
			t.Fatalf("call %d took %v with a 100ms timeout", i, took)
		}
		var ne net.Error
		timeout := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
		if !errors.Is(err, ErrUnavailable) || !timeout || errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("call %d: err %v; want a timeout wrapped in ErrUnavailable", i, err)
		}
		if d.Allowed || d.RetryAfter <= 0 {
			t.Fatalf("call %d: FailClosed answered %+v", i, d)
		}
	}
	before := sent.N()
	d, err := l.Allow(ctx, "k")
	if !errors.Is(err, ErrCircuitOpen) || d.Allowed {
		t.Fatalf("after 3 timeouts: %+v, %v; want a fast ErrCircuitOpen denial", d, err)
	}
	if sent.N() != before {
		t.Fatal("an open breaker let a command through")
	}
	redistest.WaitFor(t, "the proxy to deliver", func() bool { return proxy.pending.Load() == 0 })
	// Each of the 3 timed-out calls consumed once: no retry, no loss.
	redistest.WaitFor(t, "the consumption to show", func() bool { return must(direct.AllowN(ctx, "k", 0)).Remaining <= 97 })
	if d := must(direct.AllowN(ctx, "k", 0)); d.Remaining != 97 {
		t.Fatalf("Remaining %d after 3 timed-out calls, want 97", d.Remaining)
	}
}

// TestFaultStopped: with no server listening, each failure policy answers
// as documented, the error says why, and after the breaker's threshold
// calls fail fast.
func TestFaultStopped(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	client := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	policies := map[string]Option{"open": WithFailOpen(), "closed": nil, "fallback": WithFallbackLocal()}
	lims := map[string]*Limiter{}
	for name, fp := range policies {
		opts := []Option{WithBreaker(NewBreaker(2, time.Hour))}
		if fp != nil {
			opts = append(opts, fp)
		}
		lims[name] = must(New(client, name, slowBucket, opts...))
		if d := must(lims[name].Allow(ctx, "k")); !d.Allowed || d.Remaining != 99 {
			t.Fatalf("%s: before the stop: %+v", name, d)
		}
	}
	srv.Stop()
	for round := range 3 {
		for name, l := range lims {
			d, err := l.Allow(ctx, "k")
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("%s round %d: err %v, want ErrUnavailable", name, round, err)
			}
			if open := errors.Is(err, ErrCircuitOpen); open != (round == 2) {
				t.Fatalf("%s round %d: ErrCircuitOpen is %v", name, round, open)
			}
			switch name {
			case "open":
				if !d.Allowed {
					t.Fatalf("FailOpen denied: %+v", d)
				}
			case "closed":
				if d.Allowed || d.RetryAfter <= 0 {
					t.Fatalf("FailClosed answered %+v", d)
				}
			case "fallback":
				// The local bucket, fresh, decides: Remaining counts down
				// from 99 (where FailOpen reports 0).
				if !d.Allowed || d.Remaining != int64(99-round) {
					t.Fatalf("Fallback round %d answered %+v", round, d)
				}
			}
		}
	}
}

// TestFaultRestart: Redis is killed and restarted on the same port in the
// middle of a run. Calls fail while it is down (fast once the breaker is
// open), and after the cool-down a probe finds it back and decisions
// resume; the restarted server lost the state (no persistence), so the key
// is fresh again.
func TestFaultRestart(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	client := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	l := must(New(client, "restart", slowBucket, WithBreaker(NewBreaker(1, 50*time.Millisecond))))
	for i := range 5 {
		if d := must(l.Allow(ctx, "k")); d.Remaining != int64(99-i) {
			t.Fatalf("before: %+v", d)
		}
	}
	srv.Stop()
	var fastFails int
	for range 3 {
		_, err := l.Allow(ctx, "k")
		if err == nil {
			t.Fatal("decided with the server down")
		}
		if errors.Is(err, ErrCircuitOpen) {
			fastFails++
		}
	}
	if fastFails < 2 {
		t.Fatalf("%d of 3 calls failed fast after the first failure", fastFails)
	}
	redistest.StartServer(t, srv.Port)
	var d hotlimit.Decision
	redistest.WaitFor(t, "a decision after the restart", func() bool {
		var err error
		d, err = l.Allow(ctx, "k")
		return err == nil
	})
	if !d.Allowed || d.Remaining != 99 {
		t.Fatalf("first decision after the restart: %+v; want a fresh key", d)
	}
}

// TestReplyErrorKeepsBreakerClosed: a reply error from a live server (here
// WRONGTYPE on a key of another type) fails the call but is not an outage.
func TestReplyErrorKeepsBreakerClosed(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	l := must(New(c, "rt", slowBucket, WithPrefix(redistest.Prefix(t)), WithBreaker(NewBreaker(1, time.Hour))))
	if err := c.LPush(ctx, l.RedisKey("list"), "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := l.Allow(ctx, "list")
	var rerr redis.Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &rerr) {
		t.Fatalf("err %v, want a reply error", err)
	}
	if l.breaker.open() {
		t.Fatal("a reply error opened the breaker")
	}
}

// TestFailurePolicyLayers: when Redis cannot decide a layered call, a
// FailClosed layer denies it; otherwise the Fallback layers decide it in
// process, all or nothing, and FailOpen layers are skipped.
func TestFailurePolicyLayers(t *testing.T) {
	c := redistest.Client(t, "127.0.0.1:1") // nothing listens there
	ctx := context.Background()
	p := hotlimit.FixedWindow{Limit: 1, Window: time.Hour}
	open := must(New(c, "open", p, WithFailOpen()))
	closed := must(New(c, "closed", p))
	fb := must(New(c, "fb", p, WithFallbackLocal()))
	defer fb.Close()

	d, idx, err := AllowLayersState(ctx, nil, Layer{open, "k", 1}, Layer{closed, "k", 1}, Layer{fb, "k", 1})
	if !errors.Is(err, ErrUnavailable) || d.Allowed || d.RetryAfter <= 0 || idx != 1 {
		t.Fatalf("with a FailClosed layer: %+v, binding %d, %v; want denied by layer 1", d, idx, err)
	}
	if d := must(fb.local.AllowN("k", 0), nil); d.Remaining != 1 {
		t.Fatalf("a denied layered call consumed from the fallback: %+v", d)
	}
	for i, want := range []bool{true, false} {
		d, idx, err := AllowLayersState(ctx, nil, Layer{open, "k", 1}, Layer{fb, "k", 1})
		if !errors.Is(err, ErrUnavailable) || d.Allowed != want || idx != 1 {
			t.Fatalf("open+fallback call %d: %+v, binding %d, %v; want Allowed %v from the local limit, layer 1", i, d, idx, err, want)
		}
	}
	if d, idx, err := AllowLayersState(ctx, nil, Layer{open, "k", 1}, Layer{open, "j", 1}); err == nil || !d.Allowed || idx != 0 {
		t.Fatalf("FailOpen layers only: %+v, binding %d, %v; want allowed, layer 0", d, idx, err)
	}
	if d, err := open.Allow(ctx, "k"); err == nil || !d.Allowed {
		t.Fatalf("FailOpen alone: %+v, %v; want allowed with an error", d, err)
	}
}

// TestFaultSlowCallerDeadline: callers whose own deadlines are shorter
// than WithTimeout still open the breaker when Redis hangs.
func TestFaultSlowCallerDeadline(t *testing.T) {
	addr := redistest.Addr(t)
	proxy := newSlowProxy(t, addr, time.Second)
	slow := redistest.Client(t, proxy.addr())
	l := must(New(slow, "slowdl", slowBucket, WithPrefix(redistest.Prefix(t)), WithTimeout(5*time.Second),
		WithBreaker(NewBreaker(2, time.Hour))))
	pctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if err := slow.Ping(pctx).Err(); err != nil { // a connection, established at leisure
		t.Fatal(err)
	}
	for i := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, err := l.Allow(ctx, "k")
		cancel()
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := l.Allow(context.Background(), "k"); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("after 2 calls that hit their deadlines: %v, want ErrCircuitOpen", err)
	}
}

// TestFaultCallerGaveUp: a call whose caller's context had already ended
// before it was made says nothing about Redis, so no circuit counts it:
// five of them must not open a breaker of threshold 5, after which a
// FailClosed limiter would refuse everyone on a healthy Redis.
func TestFaultCallerGaveUp(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	l := must(New(c, "gaveup", slowBucket, WithPrefix(redistest.Prefix(t)), WithBreaker(NewBreaker(5, time.Hour))))
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	canceled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for i := range 10 {
		ctx := expired
		if i%2 == 1 {
			ctx = canceled
		}
		d, err := l.Allow(ctx, "k")
		if !errors.Is(err, ErrUnavailable) || d.Allowed {
			t.Fatalf("call %d with an ended context: %+v, %v; want a FailClosed denial", i, d, err)
		}
	}
	if d, err := l.Allow(context.Background(), "k"); err != nil || !d.Allowed || d.Remaining != 99 {
		t.Fatalf("a live caller after 10 that had given up: %+v, %v; want Redis's admission", d, err)
	}
}

// TestFaultRecoveryAfterLongOutage: after more failed dials than its pool
// size, go-redis stops dialing and redials in the background about once a
// second. The breaker's probe must not wait for that: once the server is
// back, the first probe (cool-down later) is decided by Redis, and so is
// every call after it. Each probe is sent after sleeping past the
// cool-down since the circuit opened (the breaker reads the real clock),
// so it is a probe whatever the schedule.
func TestFaultRecoveryAfterLongOutage(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true,
		PoolSize: 4, DialTimeout: time.Second, Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := context.Background()
	const cooldown = 20 * time.Millisecond
	b := NewBreaker(1, cooldown)
	l := must(New(c, "recover", slowBucket, WithBreaker(b), WithTimeout(time.Second)))
	if _, err := l.Allow(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	// A long outage: 12 probes, one per cool-down, all failing to dial.
	for i := range 12 {
		time.Sleep(cooldown + time.Millisecond)
		if _, err := l.Allow(ctx, "k"); err == nil || errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("probe %d with the server down: %v; want a failed call", i, err)
		}
	}
	redistest.StartServer(t, srv.Port)
	time.Sleep(cooldown + time.Millisecond)
	for i := range 20 {
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatalf("call %d after the server came back (the first is the probe): %+v, %v", i, d, err)
		}
	}
}
