package fuzz

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/refmodel"
)

// Byte layout of a FuzzConcurrentTotals input (bytes past the end read
// as 0):
//
//	policy header    as for FuzzDecisions (kind, time selector, count selector)
//	byte             goroutines: 2 + b%7
//	byte             shards: 1 << (b%3)
//	8 bytes          the frozen clock reading: raw % 2^61
//	one byte each    goroutine i's cost: 1 + b % min(4, Limit)
//
// Policies with a Limit above maxConcurrentLimit are skipped: every
// goroutine loops until it is denied, so a run costs about Limit decisions.
const maxConcurrentLimit = 4096

// runConcurrent runs one FuzzConcurrentTotals input.
//
// With the clock frozen, goroutines hammer two keys (an inline one and a
// long one) with their own costs, each until its first denial, while one
// goroutine sweeps continuously and one peeks. Then, per key:
//
//   - the admitted cost plus the final Remaining is exactly the policy's
//     capacity (Limit), and Remaining is below every goroutine's cost (each
//     was denied, and at a frozen instant a cost is denied iff it exceeds
//     Remaining); with unit costs, exactly Limit is admitted;
//   - the peeker never saw Remaining grow (nothing frees capacity at a
//     frozen instant: a growth means a lost update or a wrongly swept key);
//   - replaying the admissions on the model admits all of them and ends in
//     the same state;
//   - Stats count every call: admissions and peeks as Allowed, exactly one
//     denial per goroutine and key, 2 keys, nothing swept or evicted;
//   - once the clock passes ResetAfter, both keys are fresh and one Sweep
//     removes both.
func runConcurrent(t testing.TB, data []byte) {
	r := &reader{b: data}
	policy := decodePolicy(r)
	g := 2 + int(r.byte()%7)
	shards := 1 << (r.byte() % 3)
	start := time.Duration(r.u64() % (1 << 61))
	clock := hotlimit.NewManualClock()
	lim, err := hotlimit.New(policy, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0), hotlimit.WithShards(shards))
	if err != nil {
		return
	}
	defer lim.Close()
	p := paramsOf(policy)
	if p.limit > maxConcurrentLimit {
		return
	}
	costs := make([]int64, g)
	minCost := p.limit
	for i := range costs {
		costs[i] = 1 + int64(r.byte())%min(4, p.limit)
		minCost = min(minCost, costs[i])
	}
	clock.Set(start)
	hot := [2]string{keys[0], keys[2]}

	counts := make([][2]int64, g) // admissions per goroutine and key
	var wg, bg sync.WaitGroup
	stop := make(chan struct{})
	var peeks atomic.Uint64
	var grew atomic.Value // first peek that saw Remaining grow
	bg.Add(2)
	go func() { // sweeper
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				lim.Sweep()
				runtime.Gosched()
			}
		}
	}()
	go func() { // peeker
		defer bg.Done()
		last := [2]int64{p.limit, p.limit}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			d := lim.AllowN(hot[i%2], 0)
			peeks.Add(1)
			if d.Remaining > last[i%2] && grew.Load() == nil {
				grew.Store(fmt.Sprintf("peek of %q saw Remaining grow from %d to %d", hot[i%2], last[i%2], d.Remaining))
			}
			last[i%2] = d.Remaining
		}
	}()
	release := make(chan struct{})
	for gi := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			var done [2]bool
			for !done[0] || !done[1] {
				for ki, k := range hot {
					if done[ki] {
						continue
					}
					if lim.AllowN(k, costs[gi]).Allowed {
						counts[gi][ki]++
					} else {
						done[ki] = true
					}
				}
			}
		}()
	}
	close(release)
	wg.Wait()
	close(stop)
	bg.Wait()

	desc := fmt.Sprintf("%#v, %d goroutines with costs %v, %d shards, clock frozen at %d", policy, g, costs, shards, start)
	if msg := grew.Load(); msg != nil {
		t.Fatalf("%s: %s", desc, msg)
	}
	m := refmodel.New(policy, clock)
	var admissions uint64
	for ki, k := range hot {
		total := int64(0)
		for gi := range g {
			total += counts[gi][ki] * costs[gi]
			admissions += uint64(counts[gi][ki])
			for range counts[gi][ki] {
				if d := m.AllowN(k, costs[gi]); !d.Allowed {
					t.Fatalf("%s: key %q: the model denies a replayed admission of cost %d: %+v", desc, k, costs[gi], d)
				}
			}
		}
		fin := lim.AllowN(k, 0)
		if total+fin.Remaining != p.limit || fin.Remaining >= minCost {
			t.Fatalf("%s: key %q: admitted %d, final %+v; want admitted + Remaining = %d and Remaining < %d",
				desc, k, total, fin, p.limit, minCost)
		}
		if want := m.Peek(k); fin != want {
			t.Fatalf("%s: key %q: final state %+v, the model after replay %+v", desc, k, fin, want)
		}
	}
	st := lim.Stats()
	want := hotlimit.Stats{Allowed: admissions + peeks.Load() + 2, Denied: uint64(2 * g), Keys: 2}
	if st != want || lim.Len() != 2 {
		t.Fatalf("%s: Stats() = %+v, Len() = %d; want %+v, Len 2", desc, st, lim.Len(), want)
	}
	reset := max(lim.AllowN(hot[0], 0).ResetAfter, lim.AllowN(hot[1], 0).ResetAfter)
	clock.Advance(reset)
	for _, k := range hot {
		if d := lim.AllowN(k, 0); d.Remaining != p.limit || d.ResetAfter != 0 {
			t.Fatalf("%s: key %q not fresh %v later, at its ResetAfter: %+v", desc, k, reset, d)
		}
	}
	if n := lim.Sweep(); n != 2 || lim.Len() != 0 {
		t.Fatalf("%s: Sweep() after ResetAfter removed %d, Len() = %d; want 2, 0", desc, n, lim.Len())
	}
}

// concurrentSeed builds a FuzzConcurrentTotals input.
func concurrentSeed(policy []byte, goroutines, shardsSel byte, start uint64, costs ...byte) []byte {
	b := append(append([]byte{}, policy...), goroutines, shardsSel)
	b = binary.BigEndian.AppendUint64(b, start)
	return append(b, costs...)
}

func concurrentSeeds() [][]byte {
	return [][]byte{
		// Token bucket 10/s, Burst 100, 8 goroutines of unit cost, 1 shard.
		concurrentSeed(pol(0, 5, 12), 6, 0, uint64(time.Hour), 0, 0, 0, 0, 0, 0, 0, 0),
		// Token bucket 1 per year, Burst 1000, mixed costs 1..4, 4 shards.
		concurrentSeed(pol(0, 0, 7), 5, 2, 12345, 0, 1, 2, 3, 0, 1, 2),
		// Token bucket at T = 1ns (the clock is frozen, so no refill).
		concurrentSeed(pol(0, 1, 7), 6, 1, 1<<40, 3, 0, 2, 1, 3, 0, 2, 1),
		// Leaky bucket 7/700ms, Capacity 64 (Limit 65), mixed costs.
		concurrentSeed(pol(1, 3, 5), 4, 1, 1, 1, 2, 0, 3, 1, 2),
		// Leaky bucket with no queue: exactly one admission per key.
		concurrentSeed(pol(1, 5, 4), 6, 0, 99, 0, 0, 0, 0, 0, 0, 0, 0),
		// Fixed window 1000 per second, frozen mid-window.
		concurrentSeed(pol(2, 4, 7), 6, 2, uint64(1500*time.Millisecond), 0, 0, 0, 0, 0, 0, 0, 0),
		// Fixed window of 1ns, Limit 5, costs 1..4.
		concurrentSeed(pol(2, 0, 3), 3, 1, 7, 0, 1, 2, 3, 3),
		// Sliding window 100 per 999ms, mixed costs.
		concurrentSeed(pol(3, 3, 12), 5, 2, uint64(2*time.Second), 1, 0, 3, 2, 1, 0, 1),
		// Sliding window of 24h, Limit 1000, unit costs.
		concurrentSeed(pol(3, 7, 7), 6, 1, uint64(36*time.Hour), 0, 0, 0, 0, 0, 0, 0, 0),
	}
}

// FuzzConcurrentTotals fuzzes runConcurrent's policy, goroutine count,
// costs and frozen instant. It is meant for -race as well as -fuzz.
func FuzzConcurrentTotals(f *testing.F) {
	for _, s := range concurrentSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { runConcurrent(t, data) })
}

// TestConcurrentTotals runs runConcurrent over every algorithm with small
// and large limits, 8 goroutines of unit and of mixed costs. Run it with
// -race.
func TestConcurrentTotals(t *testing.T) {
	policies := [][]byte{
		pol(0, 5, 12), pol(0, 1, 7), pol(0, 11, 0), pol(0, 8, 5),
		pol(1, 5, 4), pol(1, 3, 6), pol(1, 0, 12),
		pol(2, 4, 7), pol(2, 0, 0), pol(2, 10, 5),
		pol(3, 3, 12), pol(3, 7, 7), pol(3, 0, 2),
	}
	for i, p := range policies {
		for _, costs := range [][]byte{{0, 0, 0, 0, 0, 0, 0, 0}, {0, 1, 2, 3, 3, 2, 1, 0}} {
			t.Run(fmt.Sprintf("%d-%v", i, costs), func(t *testing.T) {
				runConcurrent(t, concurrentSeed(p, 6, byte(i), uint64(i)*uint64(time.Hour)+uint64(i), costs...))
			})
		}
	}
}
