package hotlimit_test

import (
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

func TestSweepRemovesOnlyFreshKeys(t *testing.T) {
	const T = 100 * time.Millisecond
	l, c := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 10})
	for i := range 100 {
		l.Allow(fmt.Sprintf("idle:%d", i))
	}
	l.AllowN("half", 10)
	c.Advance(T) // idle keys are full again; "half" owes 9 intervals
	before := l.AllowN("half", 0)
	if n := l.Sweep(); n != 100 {
		t.Fatalf("Sweep removed %d, want 100", n)
	}
	if l.Len() != 1 {
		t.Fatalf("Len() = %d after sweep, want 1", l.Len())
	}
	if after := l.AllowN("half", 0); after != before {
		t.Fatalf("half-drained key changed: %+v, want %+v", after, before)
	}
	st := l.Stats()
	if st.Swept != 100 || st.Keys != 1 || st.Evicted != 0 {
		t.Fatalf("Stats = %+v", st)
	}
	c.Advance(9 * T)
	if n := l.Sweep(); n != 1 || l.Len() != 0 {
		t.Fatalf("second sweep removed %d, Len %d; want 1, 0", n, l.Len())
	}
}

// TestSweepsChangeNoDecision replays random traces twice, once with a sweep
// between every two operations, and requires identical decisions.
func TestSweepsChangeNoDecision(t *testing.T) {
	for pi, p := range testPolicies() {
		t.Run(fmt.Sprintf("%d-%T", pi, p), func(t *testing.T) {
			scale, limit := policyScale(p)
			plain, c1 := newManual(t, p, hotlimit.WithShards(1))
			swept, c2 := newManual(t, p, hotlimit.WithShards(1))
			r := rand.New(rand.NewPCG(uint64(pi), 7))
			removed := 0
			for i := range 2000 {
				d := randAdvance(r, scale)
				if c1.Now() > 100*365*24*time.Hour {
					d = 0
				}
				c1.Advance(d)
				c2.Advance(d)
				key := fmt.Sprintf("k%d", r.IntN(6))
				cost := r.Int64N(limit+1) % 4
				removed += swept.Sweep()
				a, b := plain.AllowN(key, cost), swept.AllowN(key, cost)
				if a != b {
					t.Fatalf("op %d: with sweeps %+v, without %+v", i, b, a)
				}
			}
			if removed == 0 {
				t.Fatalf("no sweep removed anything: the test proved nothing")
			}
		})
	}
}

// TestSweeperStress hammers keys that hover around fresh while sweeps run
// continuously, with the clock frozen: each key admits exactly its burst.
func TestSweeperStress(t *testing.T) {
	l, c := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 50}, hotlimit.WithShards(2))
	c.Set(time.Hour)
	stop := make(chan struct{})
	var sweeps atomic.Int64
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer swg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				l.Sweep()
				sweeps.Add(1)
			}
		}
	}()
	const keys = 8
	for round := range 20 {
		var admitted [keys]atomic.Int64
		inParallel(16, func(g int) {
			for i := range 200 {
				k := (g + i) % keys
				// Peeks hold keys at fresh while the sweeper races them.
				l.AllowN(fmt.Sprintf("r%d-k%d", round, k), 0)
				if l.Allow(fmt.Sprintf("r%d-k%d", round, k)).Allowed {
					admitted[k].Add(1)
				}
			}
		})
		for k := range admitted {
			if got := admitted[k].Load(); got != 50 {
				t.Fatalf("round %d key %d admitted %d, want 50", round, k, got)
			}
		}
	}
	close(stop)
	swg.Wait()
	if sweeps.Load() == 0 {
		t.Fatal("sweeper never ran")
	}
}

// TestMaxKeysFlood: 100,000 distinct keys against WithMaxKeys(1000) keep
// Len() ≤ 1000 throughout, and a victim drained beforehand stays denied.
func TestMaxKeysFlood(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 10},
		hotlimit.LeakyBucket{Rate: hotlimit.PerMinute(10), Capacity: 9},
		hotlimit.FixedWindow{Limit: 10, Window: time.Minute},
		hotlimit.SlidingWindow{Limit: 10, Window: time.Minute},
		hotlimit.SlidingLog{Limit: 10, Window: time.Minute},
	} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) {
			l, c := newManual(t, p, hotlimit.WithMaxKeys(1000))
			c.Set(time.Hour)
			for l.Allow("victim").Allowed {
			}
			var maxLen atomic.Int64
			inParallel(4, func(g int) {
				for i := range 25_000 {
					l.Allow(fmt.Sprintf("flood:%d:%d", g, i))
					if n := int64(l.Len()); n > maxLen.Load() {
						maxLen.Store(n)
					}
					if i%1000 == 0 {
						c.Advance(time.Millisecond)
					}
				}
			})
			if m := maxLen.Load(); m > 1000 {
				t.Fatalf("Len() reached %d, bound is 1000", m)
			}
			if d := l.Allow("victim"); d.Allowed {
				t.Fatalf("victim's drained bucket was reset by the flood: %+v", d)
			}
			st := l.Stats()
			if st.Keys > 1000 || st.Swept+st.Evicted < 99_000 {
				t.Fatalf("Stats = %+v", st)
			}
		})
	}
}

func TestMaxKeysPrefersFresh(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5},
		hotlimit.SlidingLog{Limit: 5, Window: 2 * time.Second},
	} {
		t.Run(fmt.Sprintf("%T", p), func(t *testing.T) {
			l, c := newManual(t, p, hotlimit.WithMaxKeys(4), hotlimit.WithShards(1))
			l.AllowN("light", 1)
			c.Advance(time.Second)
			l.AllowN("drained-a", 5)
			l.AllowN("drained-b", 5)
			l.AllowN("drained-c", 5)
			c.Advance(time.Second) // "light" is fresh again
			l.Allow("new")
			if l.Len() != 4 {
				t.Fatalf("Len() = %d, want 4", l.Len())
			}
			st := l.Stats()
			if st.Swept != 1 || st.Evicted != 0 {
				t.Fatalf("Stats = %+v: want the fresh key swept, nothing evicted", st)
			}
			for _, k := range []string{"drained-a", "drained-b", "drained-c"} {
				if d := l.AllowN(k, 0); d.Remaining == 5 {
					t.Fatalf("%s was evicted", k)
				}
			}
			l.Allow("newer") // all non-fresh now: one is evicted
			if st := l.Stats(); st.Evicted != 1 || l.Len() != 4 {
				t.Fatalf("Stats = %+v, Len %d", st, l.Len())
			}
		})
	}
}

// TestShrinkReturnsMemory: after many keys go idle and a sweep runs, the
// tables shrink back.
func TestShrinkReturnsMemory(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	l, c := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 1})
	empty := heap()
	for i := range 200_000 {
		l.Allow(fmt.Sprintf("user:%06d", i))
	}
	full := heap()
	c.Advance(time.Second)
	l.Sweep()
	after := heap()
	if full-empty < 4<<20 || after > empty+(full-empty)/10 {
		t.Fatalf("heap: empty %d, with 200k keys %d, after sweep %d", empty, full, after)
	}
}

func TestSweeperGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := hotlimit.NewManualClock()
		l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 1},
			hotlimit.WithClock(c), hotlimit.WithSweepInterval(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		l.Allow("a")
		c.Advance(time.Second)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if l.Len() != 1 {
			t.Fatalf("swept before the interval: Len %d", l.Len())
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if l.Len() != 0 {
			t.Fatalf("not swept after the interval: Len %d", l.Len())
		}
		l.Close()
		l.Close() // idempotent
		// synctest.Test fails if the sweeper goroutine outlives the bubble.
	})
}

func TestCloseRacesAllow(t *testing.T) {
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1000), Burst: 10},
		hotlimit.WithSweepInterval(time.Microsecond), hotlimit.WithCoarseClock(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				l.Allow(fmt.Sprintf("k%d", (g+i)%50))
			}
		}()
	}
	l.Close()
	l.Close()
	wg.Wait()
	if st := l.Stats(); st.Allowed+st.Denied != 8000 {
		t.Fatalf("Stats = %+v, want 8000 decisions", st)
	}
}

// TestMaxKeysFloodSparesDrainedKey: a drained key survives a flood of new
// keys that each use 1 of 10 units, in one shard or in many: every sample
// of 4 distinct entries holds a fresher one, so the drained key is never
// the one evicted (gc.go states the guarantee).
func TestMaxKeysFloodSparesDrainedKey(t *testing.T) {
	for _, shards := range []int{1, 256} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 10}, hotlimit.WithShards(shards), hotlimit.WithMaxKeys(1000))
			for l.Allow("abuser").Allowed {
			}
			for i := range 100_000 {
				l.Allow(fmt.Sprint("flood:", i))
			}
			if d := l.AllowN("abuser", 0); d.Remaining != 0 {
				t.Fatalf("the drained key was evicted by the flood: %+v", d)
			}
			if st := l.Stats(); st.Evicted != 99_001 || l.Len() != 1000 {
				t.Fatalf("Stats %+v, Len %d: want 99,001 evicted, 1,000 held", st, l.Len())
			}
		})
	}
}

// TestMaxKeysFloodSparesDrainedKeyFewKeys: under WithMaxKeys of 2 or 3
// (fewer keys than a sample holds, and the default shard count) every
// eviction compares every key, so the drained key, which no other key is
// as drained as, is never the one removed.
func TestMaxKeysFloodSparesDrainedKeyFewKeys(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint("max ", n), func(t *testing.T) {
			l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 10}, hotlimit.WithMaxKeys(n))
			for l.Allow("abuser").Allowed {
			}
			for i := range 10_000 {
				l.Allow(fmt.Sprint("flood:", i))
			}
			if d := l.AllowN("abuser", 0); d.Remaining != 0 {
				t.Fatalf("the drained key was evicted by the flood: %+v", d)
			}
			if st := l.Stats(); st.Evicted != uint64(10_000-(n-1)) || l.Len() != n {
				t.Fatalf("Stats %+v, Len %d: want %d evicted, %d held", st, l.Len(), 10_000-(n-1), n)
			}
		})
	}
}

// TestMaxKeysSixteenDrainedKeys: 16 drained keys among 1,000, a million
// evictions. An eviction removes a drained key only if its sample of 4 is
// all drained keys: probability C(16,4)/C(1000,4) ≈ 4.4e-8, so the number
// of drained keys reset is about Poisson(0.044). The test allows 3: a
// correct limiter fails it with probability below 2e-7 (P(Poisson(0.044) ≥
// 4) ≈ 0.044⁴/24). The sampler this replaced reset 9 to 14 of the 16.
// Under -short or the race detector it runs 100,000 evictions, too few to
// tell the old sampler apart (it passed there in our run): scripts/check
// runs it once more without the race detector.
func TestMaxKeysSixteenDrainedKeys(t *testing.T) {
	l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 10}, hotlimit.WithMaxKeys(1000))
	for a := range 16 {
		for l.Allow(fmt.Sprint("abuser:", a)).Allowed {
		}
	}
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 100_000
	}
	for i := range n {
		l.Allow(fmt.Sprint("flood:", i))
	}
	reset := 0
	for a := range 16 {
		if l.AllowN(fmt.Sprint("abuser:", a), 0).Remaining != 0 {
			reset++
		}
	}
	if reset > 3 {
		t.Fatalf("%d of 16 drained keys were reset by %d evictions; expected about %.2f", reset, n, float64(n)*4.4e-8)
	}
}
