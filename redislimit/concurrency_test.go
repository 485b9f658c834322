package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestConcurrencyExact: 4 instances × 4 goroutines race for a limit of 3
// in flight on one key: exactly 3 permits are granted; a release frees
// exactly one unit, and only the first Release of a permit counts.
func TestConcurrencyExact(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	var granted atomic.Int64
	var mu sync.Mutex
	var permits []Permit
	var wg sync.WaitGroup
	var insts []*Concurrency
	for range 4 {
		c := must(NewConcurrency(redistest.Client(t, addr), "exports", 3, time.Hour, WithPrefix(prefix), WithTimeout(5*time.Second)))
		insts = append(insts, c)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					p, ok, err := c.TryAcquireN(ctx, "tenant", 1)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						granted.Add(1)
						mu.Lock()
						permits = append(permits, p)
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	if granted.Load() != 3 {
		t.Fatalf("%d permits granted for a limit of 3", granted.Load())
	}
	if n := must(insts[0].InFlight(ctx, "tenant")); n != 3 {
		t.Fatalf("InFlight %d, want 3", n)
	}
	if ok := must(permits[0].Release(ctx)); !ok {
		t.Fatal("the first Release did not count")
	}
	if ok := must(permits[0].Release(ctx)); ok {
		t.Fatal("a second Release counted")
	}
	if _, ok, _ := insts[1].TryAcquireN(ctx, "tenant", 2); ok {
		t.Fatal("2 units granted with 1 free")
	}
	if _, ok, _ := insts[2].TryAcquireN(ctx, "tenant", 1); !ok {
		t.Fatal("the released unit was not granted")
	}
	// Keys apart from a rate limiter of the same name.
	l := must(New(redistest.Client(t, addr), "exports", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, WithPrefix(prefix)))
	if l.RedisKey("tenant") == insts[0].l.RedisKey("tenant") || l.RedisKey("") == insts[0].l.RedisKey("") {
		t.Fatal("a concurrency limit and a rate limiter share a Redis key")
	}
}

// TestConcurrencyLease: a holder that never releases (it crashed) loses
// its units when its lease ends, to the microsecond of the server's clock
// (injected here); Renew extends a lease, and a permit whose lease ended
// can neither be renewed nor released.
func TestConcurrencyLease(t *testing.T) {
	c := must(NewConcurrency(redistest.Client(t, redistest.Addr(t)), "lease", 2, time.Second, WithPrefix(redistest.Prefix(t))))
	now := int64(baseMicros)
	c.l.testNow = func() int64 { return now }
	ctx := context.Background()
	crashed, _, _ := c.TryAcquireN(ctx, "k", 1)
	alive, ok, err := c.TryAcquireN(ctx, "k", 1)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	now += 1_000_000 - 1
	if _, ok, _ := c.TryAcquireN(ctx, "k", 1); ok {
		t.Fatal("granted 1µs before the leases end")
	}
	if ok := must(alive.Renew(ctx)); !ok {
		t.Fatal("Renew of a live permit failed")
	}
	now++
	// crashed's lease has ended; alive's was renewed.
	if n := must(c.InFlight(ctx, "k")); n != 1 {
		t.Fatalf("InFlight %d after the crashed holder's lease ended, want 1", n)
	}
	if _, ok, _ := c.TryAcquireN(ctx, "k", 1); !ok {
		t.Fatal("the crashed holder's unit was not freed")
	}
	if ok := must(crashed.Renew(ctx)); ok {
		t.Fatal("a permit whose lease ended was renewed")
	}
	if ok := must(crashed.Release(ctx)); ok {
		t.Fatal("a permit whose lease ended released units")
	}
	if ok := must(alive.Release(ctx)); !ok {
		t.Fatal("the renewed permit did not hold its unit")
	}
}

func TestConcurrencyRejects(t *testing.T) {
	c := redistest.Client(t, "127.0.0.1:1")
	for _, tc := range []struct {
		limit int64
		lease time.Duration
		opts  []Option
	}{
		{0, time.Second, nil},
		{1, time.Millisecond + 1, nil},
		{1, 0, nil},
		{1, time.Second, []Option{WithLocalDenials(10)}},
		{1, time.Second, []Option{WithFallbackLocal()}},
		{1, time.Second, []Option{WithLeases(0, 0)}},
	} {
		if _, err := NewConcurrency(c, "x", tc.limit, tc.lease, tc.opts...); err == nil {
			t.Errorf("NewConcurrency(%d, %v, %d options) accepted", tc.limit, tc.lease, len(tc.opts))
		}
	}
}

// TestConcurrencyReleaseEnded: a permit whose lease ended reports false on
// Release, also when no call removed it from the key's set in the
// meantime (limit 2: the second permit never had to wait for the first's
// units).
func TestConcurrencyReleaseEnded(t *testing.T) {
	c := must(NewConcurrency(redistest.Client(t, redistest.Addr(t)), "ended", 2, time.Second, WithPrefix(redistest.Prefix(t))))
	now := int64(baseMicros)
	c.l.testNow = func() int64 { return now }
	ctx := context.Background()
	p1, ok1, err1 := c.TryAcquireN(ctx, "k", 1)
	now += 500_000
	p2, ok2, err2 := c.TryAcquireN(ctx, "k", 1)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		t.Fatal(ok1, ok2, err1, err2)
	}
	now += 700_000 // 1.2s after p1, 0.7s after p2
	if ok := must(p1.Release(ctx)); ok {
		t.Fatal("Release of a permit whose lease ended 200ms ago reported true")
	}
	if ok := must(p2.Release(ctx)); !ok {
		t.Fatal("Release of a live permit reported false")
	}
	if n := must(c.InFlight(ctx, "k")); n != 0 {
		t.Fatalf("InFlight %d after both permits ended, want 0", n)
	}
}
