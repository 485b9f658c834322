package hotlimit

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit/internal/testhook"
)

// sampleCase is a limiter whose live entries are laid out in one of the
// patterns eviction's sample must not be biased by.
type sampleCase struct {
	name   string
	shards int
	insert int                       // keys inserted
	retire func(shard, pos int) bool // which slots become tombstones
}

// TestEvictionSampleUniform checks the guarantee stated in gc.go: each
// sample holds min(evictMin, N) distinct live entries drawn uniformly from
// the whole limiter, whatever its shards and tombstones.
//
// The bound it checks: entry x's inclusion count X over T samples is
// Binomial(T, p) with p = m/N under uniform sampling, and T = 400·N makes
// μ = T·p = 1,600. The test requires |X − μ| < μ/4 for every entry.
// By Chernoff's bound P(|X − μ| ≥ δμ) ≤ 2·exp(−δ²μ/3) = 2·exp(−33.3) <
// 7e-15 per entry; over the 660 entries of all patterns, a correct sampler
// fails with probability below 5e-12. The seeds are fixed, so the outcome
// is the same on every run. The old sampler (runs of consecutive slots,
// shards in order from a random one) missed this bound by far in every
// pattern.
func TestEvictionSampleUniform(t *testing.T) {
	const m = evictMin
	cases := []sampleCase{
		{"1 shard, no tombstones", 1, 100, nil},
		{"1 shard, tombstone runs", 1, 400, func(_, pos int) bool { return pos/8%4 != 0 }},
		{"1 shard, every other slot", 1, 200, func(_, pos int) bool { return pos%2 == 0 }},
		{"16 shards, half of them mostly tombstones", 16, 320, func(sh, pos int) bool { return sh < 8 && pos%8 != 0 }},
		{"16 shards, no tombstones", 16, 60, nil},
		{"256 shards, sparse (scan path)", 256, 40, nil},
	}
	total := 0
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(TokenBucket{Rate: PerSecond(1), Burst: 10}, WithShards(tc.shards), WithSweepInterval(0), WithClock(NewManualClock()))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			l.seed = 0x5eed0000 + uint64(i) // fixed shard placement
			for k := range tc.insert {
				l.AllowN(fmt.Sprint("key:", k), int64(k%10)) // varied scores; cost 0 creates nothing
				l.AllowN(fmt.Sprint("key:", k), 1)
			}
			// Make the tombstone pattern, by slot position.
			for si := range l.shards {
				s := &l.shards[si]
				s.mu.Lock()
				tab := s.tab.Load()
				for pos := range tab.slots {
					sl := &tab.slots[pos]
					if sl.hash.Load() != 0 && tc.retire != nil && tc.retire(si, pos) && tab.retire(sl, sl.word.Load()) {
						l.keys.Add(-1)
					}
				}
				s.mu.Unlock()
			}
			N := int(l.keys.Load())
			if N < 2*m {
				t.Fatalf("only %d live entries", N)
			}
			total += N
			counts := map[*slot]int{}
			r := rand.New(rand.NewPCG(uint64(i), 7))
			var c [m]candidate
			samples := 400 * N
			for range samples {
				n := l.sample(c[:], 0, r.IntN)
				if n != m {
					t.Fatalf("a sample of %d entries, want %d", n, m)
				}
				for j := range n {
					if c[j].sl.word.Load()&deadBit != 0 {
						t.Fatal("a tombstone was sampled")
					}
					for k := range j {
						if c[k].sl == c[j].sl {
							t.Fatal("an entry was sampled twice")
						}
					}
					counts[c[j].sl]++
				}
			}
			if len(counts) != N {
				t.Fatalf("%d of %d live entries were ever sampled", len(counts), N)
			}
			mu := float64(samples) * m / float64(N)
			lo, hi := math.MaxInt, 0
			for _, x := range counts {
				lo, hi = min(lo, x), max(hi, x)
			}
			if float64(lo) <= 0.75*mu || float64(hi) >= 1.25*mu {
				t.Fatalf("inclusion counts in [%d, %d], want within ±25%% of %.0f (N %d, %d samples)", lo, hi, mu, N, samples)
			}
			t.Logf("N %d: inclusion counts in [%d, %d] around %.0f", N, lo, hi, mu)
		})
	}
	if total > 660 {
		t.Fatalf("%d entries in all: the stated bound counts 660 at most", total)
	}
}

// TestEvictionRetiresOnlyTheScoredWord: an entry whose word changed between
// its scoring and its retirement is not retired (it was scored on one read
// and would be retired on another).
func TestEvictionRetiresOnlyTheScoredWord(t *testing.T) {
	l, err := New(TokenBucket{Rate: PerSecond(1), Burst: 10}, WithShards(1), WithMaxKeys(2), WithSweepInterval(0), WithClock(NewManualClock()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Allow("a")
	l.Allow("b")
	// The draws visit the slots in order; the tie break between "a" and "b"
	// (equal scores) runs after both were scored, and drains both first.
	slotDraw := 0
	rnd := func(n int) int {
		switch n {
		case 1: // the shard
			return 0
		case 2: // the tie break
			l.AllowN("a", 9)
			l.AllowN("b", 9)
			return 0
		}
		slotDraw++
		return (slotDraw - 1) % n
	}
	if found, _, _ := l.evictFrom(0, rnd, 0, ""); !found {
		t.Fatal("evictFrom found nothing to look at")
	}
	if st := l.Stats(); l.Len() != 2 || st.Evicted != 0 || st.Swept != 0 {
		t.Fatalf("Len %d, Stats %+v: an entry was retired on a word other than the one scored", l.Len(), st)
	}
	for _, k := range []string{"a", "b"} {
		if d := l.AllowN(k, 0); d.Remaining != 0 {
			t.Fatalf("%s = %+v, want drained", k, d)
		}
	}
}

// TestSmallMaxKeysSamplesDensely checks that a full limiter under a small
// WithMaxKeys, built with the default shard count, keeps eviction's
// rejection sample dense (shards × longest table ≤ 32 × keys, the test in
// sample), so that making room never falls back to scanning every shard;
// and that WithShards, given explicitly, is kept as given.
func TestSmallMaxKeysSamplesDensely(t *testing.T) {
	for _, maxKeys := range []int{1, 2, 3, 4, 7, 8, 16, 100, 1000, 5000} {
		l, err := New(TokenBucket{Rate: PerSecond(10), Burst: 10}, WithClock(NewManualClock()), WithSweepInterval(0), WithMaxKeys(maxKeys))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 * maxKeys { // fills it, then evicts 9·maxKeys times
			l.Allow(fmt.Sprint("k", i))
		}
		if l.Len() != maxKeys {
			t.Fatalf("maxKeys %d: Len() = %d", maxKeys, l.Len())
		}
		if cost, budget := int64(len(l.shards))*l.slotsMax.Load(), 32*l.keys.Load(); cost > budget {
			t.Errorf("maxKeys %d: %d shards × %d slots = %d > 32 × %d keys: every eviction scans", maxKeys, len(l.shards), l.slotsMax.Load(), cost, l.keys.Load())
		}
		l.Close()
	}
	l, err := New(TokenBucket{Rate: PerSecond(10), Burst: 10}, WithSweepInterval(0), WithMaxKeys(1), WithShards(256))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(l.shards) != 256 {
		t.Errorf("WithShards(256), WithMaxKeys(1): %d shards", len(l.shards))
	}
}

// TestEvictionKeepsRoomForTheEvictor: the room an eviction frees is the
// evicting insertion's, not the next comer's. When it was released, another
// insertion could take it between the eviction and the evictor's own
// reservation, and the evictor then evicted a second entry (the one just
// inserted, under WithMaxKeys(1)) for one insertion.
func TestEvictionKeepsRoomForTheEvictor(t *testing.T) {
	l, err := New(TokenBucket{Rate: PerSecond(1), Burst: 10}, WithClock(NewManualClock()), WithSweepInterval(0), WithMaxKeys(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.AllowN("held", 3)
	found, took, _ := l.evictFrom(0, rand.IntN, l.hash("new"), "new")
	if !found || !took {
		t.Fatalf("evictFrom on a full limiter of one entry: found %v, took %v; want the entry evicted and its room kept", found, took)
	}
	if l.tryReserveKey() {
		t.Fatal("another insertion reserved the room the eviction freed for its evictor")
	}
	if n := l.Len(); n != 1 {
		t.Fatalf("Len %d, want 1: the evictor's reservation", n)
	}
	if st := l.Stats(); st.Evicted != 1 {
		t.Fatalf("Stats %+v, want 1 evicted", st)
	}
	l.keys.Add(-1) // the evictor gives its reservation back
}

// TestInsertionNeverEvictsItsOwnKey: an insertion of k that finds the
// limiter full looks for room, and meanwhile another request inserted k.
// When k is in the eviction's sample it is left alone and the insertion
// uses it; evicting it to insert k fresh forgot the admission just made
// there (under WithMaxKeys(1), two concurrent first requests for k were
// then both admitted on a fresh bucket, which no order of the two
// explains; the linearize histories under WithMaxKeys(1) found it).
func TestInsertionNeverEvictsItsOwnKey(t *testing.T) {
	l, err := New(TokenBucket{Rate: PerSecond(1), Burst: 3}, WithClock(NewManualClock()), WithSweepInterval(0), WithMaxKeys(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.AllowN("k", 3) // the other request's insertion of k
	if l.reserveKey(0, l.hash("k"), "k") {
		l.keys.Add(-1)
		t.Fatal("reserveKey for k made room, evicting k itself")
	}
	if d := l.Check("k", 0); d.Remaining != 0 {
		t.Fatalf("k = %+v: its admission was forgotten", d)
	}
	if st := l.Stats(); st.Evicted != 0 || l.Len() != 1 {
		t.Fatalf("Stats %+v, Len %d: want nothing evicted, k held", st, l.Len())
	}
}

// TestLogInsertionNeverEvictsItsOwnKey is TestInsertionNeverEvictsItsOwnKey
// for the sliding log, whose rings are sampled stripe by stripe.
func TestLogInsertionNeverEvictsItsOwnKey(t *testing.T) {
	l, err := New(SlidingLog{Limit: 3, Window: time.Minute}, WithClock(NewManualClock()), WithSweepInterval(0), WithMaxKeys(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.AllowN("k", 3) // the other request's insertion of k
	if l.reserveKey(0, 0, "k") {
		l.keys.Add(-1)
		t.Fatal("reserveKey for k made room, evicting k itself")
	}
	if d := l.Check("k", 0); d.Remaining != 0 {
		t.Fatalf("k = %+v: its admission was forgotten", d)
	}
	if st := l.Stats(); st.Evicted != 0 || l.Len() != 1 {
		t.Fatalf("Stats %+v, Len %d: want nothing evicted, k held", st, l.Len())
	}
}

// TestNeverAfterEvictionReportsTheVacantKey: an insertion that evicted to
// make room, and whose cost SetPolicy put above the Limit before it
// decided, is denied with Never reporting the state its key has with no
// entry (owing until sweptAt at a reading older than it: Limiter.vacant),
// as a peek at the same instant reports it, not a fresh key's. The
// linearize module's bucket histories found it (about one CI-sized run
// in ten failed).
func TestNeverAfterEvictionReportsTheVacantKey(t *testing.T) {
	clk := NewManualClock()
	clk.Set(time.Millisecond)
	leaky := func(capacity int64) Policy {
		return LeakyBucket{Rate: Rate{N: 1, Per: 10 * time.Microsecond}, Capacity: capacity}
	}
	l, err := New(leaky(4), WithClock(clk), WithMaxKeys(1), WithShards(1), WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if d := l.AllowN("a", 1); !d.Allowed {
		t.Fatalf("a: %+v", d)
	}
	// c's insertion, 1ms later, evicts a, fresh since 1.01ms: sweptAt is
	// 1.01ms. Then the clock is set back to 1ms, where b's insertion
	// evicts c and, before b is decided, SetPolicy lowers the limit from 5
	// to 3, below b's cost. b, with no entry, owes until 1.01ms.
	clk.Set(2 * time.Millisecond)
	if d := l.AllowN("c", 1); !d.Allowed {
		t.Fatalf("c: %+v", d)
	}
	clk.Set(time.Millisecond)
	lower := func() {
		if err := l.SetPolicy(leaky(2)); err != nil {
			t.Error(err)
		}
	}
	if !testhook.Evicted.CompareAndSwap(nil, &lower) {
		t.Fatal("testhook.Evicted is in use")
	}
	d := l.AllowN("b", 4)
	testhook.Evicted.Store(nil)
	peek := l.AllowN("b", 0)
	want := Decision{Limit: 3, Remaining: 2, RetryAfter: Never, ResetAfter: 10 * time.Microsecond}
	if d != want || peek.Remaining != want.Remaining || peek.ResetAfter != want.ResetAfter {
		t.Errorf("b at cost 4: %+v, then a peek %+v; want %+v, and the peek's Remaining and ResetAfter the same", d, peek, want)
	}
}
