package hotlimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
)

func newConc(t *testing.T, limit int64, opts ...hotlimit.Option) *hotlimit.ConcurrencyLimiter {
	t.Helper()
	c, err := hotlimit.NewConcurrency(limit, append([]hotlimit.Option{hotlimit.WithSweepInterval(0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestConcurrencyMaxInFlight: with N = 8 and 64 goroutines on one key,
// never more than N are in flight (however the goroutines are scheduled),
// N are reachable, and after all release the key is swept.
func TestConcurrencyMaxInFlight(t *testing.T) {
	const N = 8
	c := newConc(t, N)
	var held []hotlimit.Permit
	for range N {
		p, ok := c.TryAcquire("export:tenant-1")
		if !ok {
			t.Fatalf("TryAcquire refused with %d of %d in flight", len(held), N)
		}
		held = append(held, p)
	}
	if _, ok := c.TryAcquire("export:tenant-1"); ok || c.InFlight("export:tenant-1") != N {
		t.Fatalf("acquire beyond %d: ok %v, InFlight %d", N, ok, c.InFlight("export:tenant-1"))
	}
	for _, p := range held {
		p.Release()
	}
	var inFlight, most, granted atomic.Int64
	inParallel(64, func(int) {
		for range 200 {
			p, ok := c.TryAcquire("export:tenant-1")
			if !ok {
				continue
			}
			granted.Add(1)
			n := inFlight.Add(1)
			for {
				m := most.Load()
				if n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			if got := c.InFlight("export:tenant-1"); got < 1 || got > N {
				t.Errorf("InFlight = %d while holding a permit", got)
			}
			runtime.Gosched() // hold it across other goroutines' tries
			inFlight.Add(-1)
			if !p.Release() {
				t.Error("first Release reported false")
			}
		}
	})
	// A try is refused only while N are held, so at least one succeeds;
	// how many overlap is the scheduler's choice.
	if m := most.Load(); m < 1 || m > N {
		t.Fatalf("most in flight = %d, want 1 to %d", m, N)
	}
	if c.InFlight("export:tenant-1") != 0 || c.Len() != 1 {
		t.Fatalf("after all released: InFlight %d, Len %d", c.InFlight("export:tenant-1"), c.Len())
	}
	if n := c.Sweep(); n != 1 || c.Len() != 0 {
		t.Fatalf("Sweep removed %d, Len %d; want 1, 0", n, c.Len())
	}
	st := c.Stats()
	if st.Allowed != uint64(granted.Load())+N || st.Swept != 1 {
		t.Fatalf("Stats = %+v, granted %d + %d", st, granted.Load(), N)
	}
}

func TestConcurrencyDoubleRelease(t *testing.T) {
	c := newConc(t, 2)
	p, _ := c.TryAcquire("k")
	q, _ := c.TryAcquire("k")
	copyOfP := p
	if !p.Release() || p.Release() || copyOfP.Release() {
		t.Fatal("a permit released more than once")
	}
	// p's token is recycled for r: the stale copies must not release r.
	r, ok := c.TryAcquire("k")
	if !ok {
		t.Fatal("slot not free after release")
	}
	if p.Release() || copyOfP.Release() {
		t.Fatal("a stale copy released a recycled permit")
	}
	if got := c.InFlight("k"); got != 2 {
		t.Fatalf("InFlight = %d, want 2 (q and r)", got)
	}
	if (hotlimit.Permit{}).Release() {
		t.Fatal("the zero Permit released something")
	}
	q.Release()
	r.Release()
	if got := c.InFlight("k"); got != 0 {
		t.Fatalf("InFlight = %d after all released", got)
	}
}

func TestConcurrencyBadInput(t *testing.T) {
	for _, n := range []int64{0, -1, 1 << 62} {
		if _, err := hotlimit.NewConcurrency(n); err == nil {
			t.Errorf("NewConcurrency(%d) succeeded", n)
		}
	}
	c := newConc(t, 3)
	for _, n := range []int64{0, -1, 4} {
		if _, ok := c.TryAcquireN("k", n); ok {
			t.Errorf("TryAcquireN(%d) succeeded", n)
		}
		if _, err := c.AcquireN(context.Background(), "k", n); !errors.Is(err, hotlimit.ErrInvalidCost) {
			t.Errorf("AcquireN(%d) = %v, want ErrInvalidCost", n, err)
		}
	}
	long := string(make([]byte, hotlimit.MaxKeyLen+1))
	if _, ok := c.TryAcquire(long); ok || c.Len() != 0 {
		t.Error("a key longer than MaxKeyLen was accepted")
	}
	if _, err := c.Acquire(context.Background(), long); !errors.Is(err, hotlimit.ErrKeyTooLong) {
		t.Errorf("Acquire(long) = %v", err)
	}
	// TryAcquireN is all or nothing.
	p, _ := c.TryAcquireN("k", 2)
	if _, ok := c.TryAcquireN("k", 2); ok || c.InFlight("k") != 2 {
		t.Fatalf("partial acquire: InFlight %d", c.InFlight("k"))
	}
	p.Release()
}

func TestConcurrencyAcquireWaits(t *testing.T) {
	c := newConc(t, 1)
	p, _ := c.TryAcquire("k")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Acquire(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire on a full key = %v, want DeadlineExceeded", err)
	}
	if c.InFlight("k") != 1 {
		t.Fatal("a failed Acquire holds a slot")
	}
	got := make(chan error)
	go func() {
		q, err := c.Acquire(context.Background(), "k")
		q.Release()
		got <- err
	}()
	time.Sleep(5 * time.Millisecond)
	p.Release()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire was not woken by a release")
	}
}

// TestConcurrencyWaitersStress: many goroutines block in Acquire on a few
// keys; every one gets through, and the limit holds throughout.
func TestConcurrencyWaitersStress(t *testing.T) {
	const N = 3
	c := newConc(t, N, hotlimit.WithShards(1))
	var inFlight [4]atomic.Int64
	inParallel(32, func(g int) {
		for i := range 50 {
			k := (g + i) % 4
			p, err := c.Acquire(context.Background(), fmt.Sprint("k", k))
			if err != nil {
				t.Error(err)
				return
			}
			if n := inFlight[k].Add(1); n > N {
				t.Errorf("key %d: %d in flight", k, n)
			}
			inFlight[k].Add(-1)
			p.Release()
		}
	})
}

// TestConcurrencyMaxKeys: under WithMaxKeys, entries with operations in
// flight are never evicted; new keys are refused until one is free.
func TestConcurrencyMaxKeys(t *testing.T) {
	c := newConc(t, 1, hotlimit.WithMaxKeys(4), hotlimit.WithShards(1))
	var held []hotlimit.Permit
	for i := range 4 {
		p, ok := c.TryAcquire(fmt.Sprint("busy", i))
		if !ok {
			t.Fatal("room for 4 keys")
		}
		held = append(held, p)
	}
	if _, ok := c.TryAcquire("new"); ok {
		t.Fatal("an entry with an operation in flight was evicted")
	}
	for i := range 4 {
		if c.InFlight(fmt.Sprint("busy", i)) != 1 {
			t.Fatalf("busy%d lost its count", i)
		}
	}
	held[2].Release()
	p, ok := c.TryAcquire("new")
	if !ok || c.Len() != 4 {
		t.Fatalf("the idle entry was not replaced: ok %v Len %d", ok, c.Len())
	}
	p.Release()
	if st := c.Stats(); st.Evicted != 0 || st.Swept != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

// TestConcurrencyAcquireWokenByRoom: room for a new key under WithMaxKeys
// is limiter-wide. With two keys held in a limiter of two, an Acquire of a
// third waits; releasing the two (whose shards are, with 4096 shards, all
// but surely not the third's) must wake it. synctest tells when every
// goroutine is blocked, so nothing here waits on real time.
func TestConcurrencyAcquireWokenByRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConc(t, 1, hotlimit.WithMaxKeys(2), hotlimit.WithShards(4096))
		a, _ := c.TryAcquire("a")
		b, _ := c.TryAcquire("b")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan error, 1)
		go func() {
			p, err := c.Acquire(ctx, "c")
			if err == nil && c.InFlight("c") != 1 {
				err = fmt.Errorf("Acquire returned but InFlight(c) = %d", c.InFlight("c"))
			}
			p.Release()
			got <- err
		}()
		synctest.Wait() // the Acquire is blocked
		select {
		case err := <-got:
			t.Fatalf("Acquire of a third key in a full limiter returned %v", err)
		default:
		}
		a.Release()
		b.Release()
		synctest.Wait()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		default:
			cancel()
			t.Fatalf("Acquire(c) still waiting after both keys went idle (cancelled, it returned %v)", <-got)
		}
	})
}

// TestConcurrencyAcquireFindsUnsampledRoom: an Acquire on a new key finds
// an idle entry that eviction's sample of a few entries misses most of the
// time (one idle among 64), without waiting for another release.
func TestConcurrencyAcquireFindsUnsampledRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConc(t, 1, hotlimit.WithMaxKeys(64), hotlimit.WithShards(16))
		held := make([]hotlimit.Permit, 64)
		for i := range held {
			var ok bool
			if held[i], ok = c.TryAcquire(fmt.Sprint("busy", i)); !ok {
				t.Fatalf("no room for key %d of 64", i)
			}
		}
		held[7].Release() // busy7 is idle: room, found by no release to come
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan error, 1)
		go func() {
			p, err := c.Acquire(ctx, "new")
			p.Release()
			got <- err
		}()
		synctest.Wait()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		default:
			cancel()
			t.Fatalf("Acquire(new) waits although busy7 is idle (cancelled, it returned %v)", <-got)
		}
		if st := c.Stats(); st.Evicted != 0 || st.Swept != 1 || c.Len() != 64 {
			t.Fatalf("Stats = %+v, Len %d: want busy7 swept, nothing evicted", st, c.Len())
		}
		for i, p := range held {
			if i != 7 && c.InFlight(fmt.Sprint("busy", i)) != 1 {
				t.Fatalf("busy%d lost its count", i)
			}
			p.Release()
		}
	})
}

// concModel is the reference: a mutex and a map of counts.
type concModel struct {
	mu    sync.Mutex
	limit int64
	n     map[string]int64
}

func (m *concModel) acquire(key string, n int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n <= 0 || n > m.limit || m.n[key]+n > m.limit {
		return false
	}
	m.n[key] += n
	return true
}

func (m *concModel) release(key string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n[key] -= n
}

// TestConcurrencyDifferential runs random acquire, release and sweep
// operations through the limiter and the model.
func TestConcurrencyDifferential(t *testing.T) {
	const limit = 5
	c := newConc(t, limit, hotlimit.WithShards(2))
	m := &concModel{limit: limit, n: map[string]int64{}}
	r := rand.New(rand.NewPCG(1, 2))
	type held struct {
		p   hotlimit.Permit
		key string
		n   int64
	}
	var hs []held
	for i := range 5000 {
		key := fmt.Sprint("k", r.IntN(4))
		switch r.IntN(5) {
		case 0, 1:
			n := r.Int64N(limit+2) - 1
			p, ok := c.TryAcquireN(key, n)
			if want := m.acquire(key, n); ok != want {
				t.Fatalf("op %d: TryAcquireN(%s, %d) = %v, model %v", i, key, n, ok, want)
			}
			if ok {
				hs = append(hs, held{p, key, n})
			}
		case 2, 3:
			if len(hs) > 0 {
				j := r.IntN(len(hs))
				h := hs[j]
				hs = append(hs[:j], hs[j+1:]...)
				h.p.Release()
				m.release(h.key, h.n)
				if r.IntN(2) == 0 && h.p.Release() {
					t.Fatalf("op %d: second release succeeded", i)
				}
			}
		default:
			c.Sweep()
		}
		if got, want := c.InFlight(key), m.n[key]; got != want {
			t.Fatalf("op %d: InFlight(%s) = %d, model %d", i, key, got, want)
		}
	}
}

func TestConcurrencyAllocatesNothing(t *testing.T) {
	c := newConc(t, 4)
	p, _ := c.TryAcquire("tenant:acme:export")
	p.Release()
	if n := testing.AllocsPerRun(1000, func() {
		p, _ := c.TryAcquire("tenant:acme:export")
		p.Release()
	}); n != 0 {
		t.Fatalf("%v allocations per acquire+release", n)
	}
}

// TestConcurrencySetLimitWakesWaiters: an AcquireN waiting on a key whose
// slots are all held must be woken when SetLimit raises the limit, since
// that frees slots as a release does; otherwise it would wait for a
// release that may never come.
func TestConcurrencySetLimitWakesWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConc(t, 1)
		held, _ := c.TryAcquire("k")
		defer held.Release()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan error, 1)
		go func() {
			p, err := c.Acquire(ctx, "k")
			if err == nil && c.InFlight("k") != 2 {
				err = fmt.Errorf("Acquire returned but InFlight(k) = %d", c.InFlight("k"))
			}
			p.Release()
			got <- err
		}()
		synctest.Wait() // the Acquire is blocked: k's one slot is held
		if err := c.SetLimit(2); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		default:
			cancel()
			t.Fatalf("Acquire(k) still waiting after SetLimit(2) freed a slot (cancelled, it returned %v)", <-got)
		}
	})
}
