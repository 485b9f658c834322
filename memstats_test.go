package hotlimit_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// heapAfterGC returns the live heap, after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemStatsMatchesHeap builds n keys in a new limiter and checks that
// MemStats().Total is within the stated tolerance of what the heap grew
// by, measured after a collection before New and after the last key. The
// tolerance is 1% (plus 48 KiB for the runtime's own noise) for the
// tables, which MemStats reads exactly, and 15% for the sliding log, whose
// map entries MemStats estimates (a third of the map's part at worst,
// about 12% of the total for Limit 1, less for larger limits).
func TestMemStatsMatchesHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds up to 50,000 keys per case")
	}
	for _, c := range []struct {
		name   string
		p      hotlimit.Policy
		keyLen int
		n      int
		tol    float64
	}{
		{"TokenBucket/short keys", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 5}, 10, 50_000, 0.01},
		{"FixedWindow/long keys", hotlimit.FixedWindow{Limit: 5, Window: time.Minute}, 40, 50_000, 0.01},
		{"SlidingLog/limit 1", hotlimit.SlidingLog{Limit: 1, Window: time.Minute}, 12, 20_000, 0.15},
		{"SlidingLog/limit 8", hotlimit.SlidingLog{Limit: 8, Window: time.Minute}, 12, 20_000, 0.15},
		{"SlidingLog/limit 100", hotlimit.SlidingLog{Limit: 100, Window: time.Minute}, 24, 10_000, 0.15},
	} {
		t.Run(c.name, func(t *testing.T) {
			keys := make([]string, c.n)
			for i := range keys {
				k := "k" + strconv.Itoa(i)
				for len(k) < c.keyLen {
					k += "-"
				}
				keys[i] = k
			}
			before := heapAfterGC()
			l, err := hotlimit.New(c.p, hotlimit.WithSweepInterval(0), hotlimit.WithClock(hotlimit.NewManualClock()))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				l.Allow(k)
			}
			after := heapAfterGC()
			ms := l.MemStats()
			runtime.KeepAlive(l)
			runtime.KeepAlive(keys) // live across both readings: not part of the growth
			grew := float64(after) - float64(before)
			got := float64(ms.Total)
			slack := c.tol*grew + 48<<10
			t.Logf("heap grew %.0f B (%.1f B/key), MemStats %+v (%.1f B/key), off by %+.1f%%",
				grew, grew/float64(c.n), ms, got/float64(c.n), 100*(got-grew)/grew)
			if got < grew-slack || got > grew+slack {
				t.Errorf("MemStats().Total = %.0f, heap grew by %.0f: off by more than %.0f%% + 48 KiB", got, grew, 100*c.tol)
			}
			if ms.Total != ms.Tables+ms.Arenas+ms.Logs+ms.Fixed {
				t.Errorf("Total %d is not the sum of the parts %+v", ms.Total, ms)
			}
			l.Close()
		})
	}
}

// TestMemStatsFollowsKeys: the parts move with the keys: the sliding
// log's bytes go back to its map estimate when every key is swept, and
// long keys fill an arena.
func TestMemStatsFollowsKeys(t *testing.T) {
	clock := hotlimit.NewManualClock()
	l, err := hotlimit.New(hotlimit.SlidingLog{Limit: 4, Window: time.Second}, hotlimit.WithSweepInterval(0), hotlimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	empty := l.MemStats()
	if empty.Logs != 0 || empty.Fixed == 0 || empty.Tables == 0 {
		t.Fatalf("empty sliding log: %+v", empty)
	}
	for i := range 1000 {
		l.Allow(fmt.Sprint("key-", i))
	}
	full := l.MemStats()
	if full.Logs < 1000*(4*8) {
		t.Fatalf("1000 keys of 4 instants: Logs %d < 32,000", full.Logs)
	}
	clock.Advance(time.Second)
	if n := l.Sweep(); n != 1000 {
		t.Fatalf("swept %d", n)
	}
	swept := l.MemStats()
	if swept.Logs >= full.Logs/2 || swept.Logs == 0 {
		t.Errorf("after sweeping every key Logs = %d (full %d): want only the maps' estimate left", swept.Logs, full.Logs)
	}

	tb, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	if a := tb.MemStats().Arenas; a != 0 {
		t.Errorf("no long key yet: Arenas %d", a)
	}
	for i := range 1000 {
		tb.Allow(fmt.Sprintf("a-long-key-of-more-than-15-bytes-%d", i))
	}
	if a := tb.MemStats().Arenas; a < 1000*34 {
		t.Errorf("1000 keys of 34+ bytes: Arenas %d < 34,000", a)
	}
}

// TestMemStatsConcurrent reads MemStats while keys are inserted, swept
// and tables grow (go test -race checks the reads), and checks that the
// sliding log's count ends where a sequential build puts it.
func TestMemStatsConcurrent(t *testing.T) {
	for _, p := range []hotlimit.Policy{
		hotlimit.SlidingLog{Limit: 2, Window: time.Second},
		hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 2},
	} {
		clock := hotlimit.NewManualClock()
		// One shard: the sliding log's map estimate depends on how many
		// keys each stripe holds, and two limiters, with their own random
		// seeds, spread the same keys over several stripes differently.
		l, err := hotlimit.New(p, hotlimit.WithSweepInterval(0), hotlimit.WithClock(clock), hotlimit.WithShards(1))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var reader sync.WaitGroup
		reader.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					if ms := l.MemStats(); ms.Total != ms.Tables+ms.Arenas+ms.Logs+ms.Fixed {
						t.Errorf("%+v: Total is not the sum", ms)
						return
					}
				}
			}
		})
		for w := range 2 {
			wg.Go(func() {
				for i := range 3000 {
					l.Allow(fmt.Sprintf("w%d-key-%d-with-a-long-suffix", w, i))
				}
			})
		}
		wg.Wait()
		close(stop)
		reader.Wait()
		full := l.MemStats()

		seq, err := hotlimit.New(p, hotlimit.WithSweepInterval(0), hotlimit.WithClock(clock), hotlimit.WithShards(1))
		if err != nil {
			t.Fatal(err)
		}
		for w := range 2 {
			for i := range 3000 {
				seq.Allow(fmt.Sprintf("w%d-key-%d-with-a-long-suffix", w, i))
			}
		}
		if want := seq.MemStats(); full.Logs != want.Logs {
			t.Errorf("%T: Logs %d after concurrent inserts, %d after sequential ones", p, full.Logs, want.Logs)
		}
		l.Close()
		seq.Close()
	}
}

// TestMemStatsAfterReset: a Reset gives back the bytes of the sliding
// log's ring as a sweep does.
func TestMemStatsAfterReset(t *testing.T) {
	l, err := hotlimit.New(hotlimit.SlidingLog{Limit: 16, Window: time.Hour}, hotlimit.WithSweepInterval(0), hotlimit.WithClock(hotlimit.NewManualClock()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	empty := l.MemStats().Logs
	for i := range 100 {
		l.Allow(fmt.Sprint("key-", i))
	}
	full := l.MemStats().Logs
	for i := range 100 {
		l.Reset(fmt.Sprint("key-", i))
	}
	after := l.MemStats().Logs
	// What stays is the maps' estimate, from their peak of 100 keys.
	if after >= full/2 || after <= empty {
		t.Errorf("Logs: %d empty, %d with 100 keys, %d after resetting them all; want only the maps' estimate left", empty, full, after)
	}
	for i := range 100 {
		l.Allow(fmt.Sprint("key-", i))
	}
	if again := l.MemStats().Logs; again != full {
		t.Errorf("Logs %d with the same 100 keys again, %d the first time", again, full)
	}
}
