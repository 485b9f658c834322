package redislimit

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// gate is a go-redis hook that counts script calls and, while closed,
// holds them until it opens.
type gate struct {
	calls   atomic.Int64
	wait    atomic.Pointer[chan struct{}]
	entered chan struct{} // one value per held call
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.HasPrefix(cmd.Name(), "eval") {
			g.calls.Add(1)
			if w := g.wait.Load(); w != nil {
				g.entered <- struct{}{}
				<-*w
			}
		}
		return next(ctx, cmd)
	}
}
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestOneRefillInFlight: while a refill is in flight, spending further
// below the low-water mark sends no other; the lease then never holds more
// than MaxLease.
func TestOneRefillInFlight(t *testing.T) {
	addr := redistest.Addr(t)
	const maxLease = 100
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	c := redistest.Client(t, addr)
	g := &gate{entered: make(chan struct{}, 1000)}
	c.AddHook(g)
	l := leased(t, c, redistest.Prefix(t), hotlimit.FixedWindow{Limit: 10_000, Window: time.Second}, clk, WithLeases(maxLease, 0))
	for range 2 { // the first lease is 1 unit; spending it refills to MaxLease
		if ok, err := admit(l, ctx, "k", 1); !ok || err != nil {
			t.Fatalf("first requests: %v, %v", ok, err)
		}
		l.leases.bg.Wait()
	}
	if h := l.held("k"); h != maxLease {
		t.Fatalf("the lease holds %d, want %d", h, maxLease)
	}
	ch := make(chan struct{})
	g.wait.Store(&ch)
	before := g.calls.Load()
	for range 80 { // from 100 down to 20, well below the low-water mark
		if ok, err := admit(l, ctx, "k", 1); !ok || err != nil {
			t.Fatalf("spending the lease: %v, %v", ok, err)
		}
	}
	<-g.entered // the refill's call, started before the spends returned
	g.wait.Store(nil)
	close(ch)
	l.leases.bg.Wait()
	if n := g.calls.Load() - before; n != 1 {
		t.Fatalf("%d refills were sent for one key, want 1", n)
	}
	if h := l.held("k"); h > maxLease {
		t.Fatalf("the lease holds %d after the refill, above MaxLease %d", h, maxLease)
	}
}

// TestBucketGiveIsExactUndo: giving a token-bucket lease back undoes only
// the instance's last take, and only while nothing else was debited since:
// the bucket is then exactly as if those units were never taken. Units
// carried from earlier takes are not given back, since the bucket may have
// refilled past them (here it did: they were taken at 0 and the bucket is
// full again at 10ms).
func TestBucketGiveIsExactUndo(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	policy := hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1000, Per: time.Second}, Burst: 10} // T = 1ms
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	a := instance(t, addr, name, policy, clk, WithLeases(7, 0))
	b := instance(t, addr, name, policy, clk)
	refill := func() {
		e := a.leases.lookup(key)
		e.busy.Store(true)
		defer e.busy.Store(false)
		if _, err := a.leases.refill(ctx, e, key, 0); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := admit(a, ctx, key, 1); !ok || err != nil { // debits 2: spends 1, holds 1
		t.Fatalf("first request: %v, %v", ok, err)
	}
	refill() // debits 6: holds 7 (MaxLease)
	if h := a.held(key); h != 7 {
		t.Fatalf("a holds %d, want 7", h)
	}
	clk.Advance(10 * time.Millisecond) // the bucket is full again
	if r, err := b.leases.take(ctx, key, 8, 8); err != nil || r.granted != 8 {
		t.Fatalf("b takes 8: %+v, %v", r, err)
	}
	if ok, err := admit(a, ctx, key, 1); !ok || err != nil { // from the lease: holds 6
		t.Fatalf("a's second request: %v, %v", ok, err)
	}
	refill() // debits 1: holds 7, 6 of them carried from before the bucket refilled
	if h := a.held(key); h != 7 {
		t.Fatalf("a holds %d after its refill, want 6 carried + 1", h)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Debited and not given back: 8 at 0 (refilled since) and b's 8 at
	// 10ms. The bucket holds exactly 10 − 8 = 2.
	r, err := b.leases.take(ctx, key, 1, 10)
	if err != nil || r.granted != 2 {
		t.Fatalf("after a gave back, the bucket grants %+v (%v), want 2", r, err)
	}
}

// TestDenialRemembered: after Redis denies a key, the instance denies it
// locally, without a round trip, until Redis's retry time; then it asks
// Redis again.
func TestDenialRemembered(t *testing.T) {
	addr := redistest.Addr(t)
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	c := redistest.Client(t, addr)
	g := &gate{}
	c.AddHook(g)
	l := leased(t, c, redistest.Prefix(t), hotlimit.FixedWindow{Limit: 3, Window: 10 * time.Millisecond}, clk, WithLeases(1, 0))
	var admitted int
	for range 3 {
		if ok, _ := admit(l, ctx, "k", 1); ok {
			admitted++
		}
		l.leases.bg.Wait()
	}
	if admitted != 3 {
		t.Fatalf("admitted %d of the limit 3", admitted)
	}
	if ok, err := admit(l, ctx, "k", 1); ok || err != nil {
		t.Fatalf("beyond the limit: %v, %v", ok, err)
	}
	calls := g.calls.Load()
	clk.Advance(10*time.Millisecond - time.Microsecond)
	for range 100 {
		if ok, err := admit(l, ctx, "k", 1); ok || err != nil {
			t.Fatalf("within the window after a denial: %v, %v", ok, err)
		}
	}
	if n := g.calls.Load() - calls; n != 0 {
		t.Fatalf("%d round trips for 100 requests on a denied key, want 0", n)
	}
	clk.Advance(time.Microsecond)
	if ok, err := admit(l, ctx, "k", 1); !ok || err != nil {
		t.Fatalf("in the next window: %v, %v", ok, err)
	}
}

// TestSharedWithRedislimit: the lease and redislimit's synchronous Limiter
// with the same name and policy spend one budget.
func TestSharedWithRedislimit(t *testing.T) {
	addr := redistest.Addr(t)
	name := redistest.Prefix(t)
	policy := hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Hour}, Burst: 10}
	ctx := context.Background()
	sync, err := New(redistest.Client(t, addr), name, policy)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if d, err := sync.AllowN(ctx, "k", 1); !d.Allowed || err != nil {
			t.Fatalf("synchronous: %+v, %v", d, err)
		}
	}
	l, err := New(redistest.Client(t, addr), name, policy, WithLeases(10, 0))
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 20 {
		if ok, err := admit(l, ctx, "k", 1); err != nil {
			t.Fatal(err)
		} else if ok {
			admitted++
		}
		l.leases.bg.Wait()
	}
	if admitted != 6 {
		t.Fatalf("the lease admitted %d after the synchronous limiter's 4 of a burst of 10, want 6", admitted)
	}
	if d, err := sync.AllowN(ctx, "k", 1); d.Allowed || err != nil {
		t.Fatalf("synchronous after the lease took the rest: %+v, %v", d, err)
	}
}

// TestHotPathAllocs: a decision that the lease covers allocates nothing.
func TestHotPathAllocs(t *testing.T) {
	addr := redistest.Addr(t)
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Hour}, Burst: 100_000},
		hotlimit.FixedWindow{Limit: 100_000, Window: time.Hour},
	} {
		l := instance(t, addr, redistest.Prefix(t), p, clk, WithLeases(10_000, 0))
		for range 2 { // a lease of 1, then of MaxLease
			if ok, err := admit(l, ctx, "hot", 1); !ok || err != nil {
				t.Fatalf("%T: first requests: %v, %v", p, ok, err)
			}
			l.leases.bg.Wait()
		}
		if n := testing.AllocsPerRun(1000, func() { admit(l, ctx, "hot", 1) }); n != 0 {
			t.Fatalf("%T: %v allocations per decision, want 0", p, n)
		}
	}
}

// TestLeaseSizeFollowsRate: at a steady 1,000 requests per second on one
// instance and the default period of 100ms, leases of about 100 units
// cost about 10 round trips per 1,000 decisions; at 10,000 per second
// they are capped by MaxLease (200): each refill tops the lease up to
// MaxLease from its low-water mark, half the previous refill, which
// settles at refills of about 133 units, 7 or 8 per 1,000.
func TestLeaseSizeFollowsRate(t *testing.T) {
	addr := redistest.Addr(t)
	for _, tc := range []struct {
		gap    time.Duration
		lo, hi int64
	}{
		{time.Millisecond, 8, 14},
		{100 * time.Microsecond, 6, 9},
	} {
		clk := hotlimit.NewManualClock()
		ctx := context.Background()
		c := redistest.Client(t, addr)
		g := &gate{}
		c.AddHook(g)
		l := leased(t, c, redistest.Prefix(t), hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 100_000, Per: time.Second}, Burst: 100_000}, clk, WithLeases(200, 0))
		run := func(n int) {
			for range n {
				if ok, err := admit(l, ctx, "k", 1); !ok || err != nil {
					t.Fatalf("request: %v, %v", ok, err)
				}
				l.leases.bg.Wait()
				clk.Advance(tc.gap)
			}
		}
		run(1000) // warm up
		before := g.calls.Load()
		run(5000)
		per1000 := (g.calls.Load() - before) / 5
		t.Logf("one request every %v: %d round trips per 1,000 decisions", tc.gap, per1000)
		if per1000 < tc.lo || per1000 > tc.hi {
			t.Errorf("one request every %v: %d round trips per 1,000 decisions, want %d to %d", tc.gap, per1000, tc.lo, tc.hi)
		}
	}
}

// TestBucketBoundIsReached: the token bucket's interval bound is tight: a
// lease taken while the bucket was full is spent after the bucket has
// refilled, so Burst + the lease are admitted at one instant.
func TestBucketBoundIsReached(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	policy := hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1000, Per: time.Second}, Burst: 10} // T = 1ms
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	a := instance(t, addr, name, policy, clk, WithLeases(5, 0))
	b := instance(t, addr, name, policy, clk, WithLeases(5, 0))
	for range 2 { // a lease of 1, then of MaxLease
		if ok, err := admit(a, ctx, key, 1); !ok || err != nil {
			t.Fatalf("first requests: %v, %v", ok, err)
		}
		a.leases.bg.Wait()
	}
	if h := a.held(key); h != 5 {
		t.Fatalf("a holds %d, want 5", h)
	}
	clk.Advance(10 * time.Millisecond) // the bucket is full again
	admitted := 0
	for range 40 { // at one instant
		for _, l := range []*Limiter{b, a} {
			if ok, err := admit(l, ctx, key, 1); err != nil {
				t.Fatal(err)
			} else if ok {
				admitted++
			}
			l.leases.bg.Wait()
		}
	}
	if admitted != 10+5 {
		t.Fatalf("admitted %d at one instant, want Burst 10 + the 5 units a held", admitted)
	}
}
