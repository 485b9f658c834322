package bench

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Policies. Each adapter maps them onto its own model (see peers.go).
var (
	// allowAll is so generous that every call of a one-key benchmark is
	// admitted: the allow path.
	allowAll = policy{Rate: 1e9, Burst: 1e9}
	// denyAll is one event per hour with a bucket of one, drained before
	// the timer starts: the deny path.
	denyAll = policy{Rate: 1.0 / 3600, Burst: 1}
	// mostlyAllow is the many-keys policy: each key sees far fewer calls
	// than its bucket holds, so these measure lookup + update.
	mostlyAllow = policy{Rate: 1e6, Burst: 1e6}
)

// oneKey is the key of the one-key workloads.
const oneKey = "user:000042"

// reportDenied reports the fraction of calls that were denied. In the
// allow benchmarks it should be 0 and in the deny ones 1; anything else is
// a semantic difference of that limiter and is worth reading.
func reportDenied(b *testing.B, denied int64) {
	if b.N > 0 {
		b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
	}
}

// drain spends a fresh bucket for key: at most burst+1 calls, stopping at
// the first denial.
func drain(k keyed, key string, burst int) {
	for i := 0; i <= burst; i++ {
		if !k.Allow(key) {
			return
		}
	}
}

// ---------------------------------------------------------------------------
// 1. One key.

func BenchmarkOneKeySerial(b *testing.B)       { benchOneKey(b, allowAll, false, false) }
func BenchmarkOneKeyParallel(b *testing.B)     { benchOneKey(b, allowAll, true, false) }
func BenchmarkOneKeyDenySerial(b *testing.B)   { benchOneKey(b, denyAll, false, true) }
func BenchmarkOneKeyDenyParallel(b *testing.B) { benchOneKey(b, denyAll, true, true) }

func benchOneKey(b *testing.B, p policy, parallel, deny bool) {
	for _, im := range allImpls() {
		if deny && !im.canDeny {
			continue // uber's Take blocks instead of denying
		}
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			k, stop := im.make(p)
			b.Cleanup(stop)
			// The key exists before the timer starts: the deny rows drain
			// its bucket, the allow rows spend one of its 1e9 tokens.
			if deny {
				drain(k, oneKey, p.Burst)
			} else {
				k.Allow(oneKey)
			}
			var denied int64
			if parallel {
				var total atomic.Int64
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var d int64
					for pb.Next() {
						if !k.Allow(oneKey) {
							d++
						}
					}
					total.Add(d)
				})
				b.StopTimer()
				denied = total.Load()
			} else {
				for b.Loop() {
					if !k.Allow(oneKey) {
						denied++
					}
				}
			}
			reportDenied(b, denied)
		})
	}
}

// ---------------------------------------------------------------------------
// 2. Many keys: K keys user:NNNNNN, all inserted before the timer, picked
// from a pre-generated index sequence.

func BenchmarkManyKeysUniformSerial(b *testing.B)   { benchManyKeys(b, uniform, false) }
func BenchmarkManyKeysUniformParallel(b *testing.B) { benchManyKeys(b, uniform, true) }
func BenchmarkManyKeysZipfSerial(b *testing.B)      { benchManyKeys(b, zipf, false) }
func BenchmarkManyKeysZipfParallel(b *testing.B)    { benchManyKeys(b, zipf, true) }

func benchManyKeys(b *testing.B, d distribution, parallel bool) {
	nk := numKeys(b)
	keys := keySet(nk)
	seq := indexSeq(d, nk)
	p := mostlyAllow
	p.Keys = nk

	for _, im := range keyedImpls() {
		// Filling K keys is slow; a parallel benchmark function is called
		// once per b.N probe, so the filled limiter is kept across those
		// calls and released when this sub-benchmark is done.
		var (
			k    keyed
			stop func()
		)
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			if k == nil {
				k, stop = im.make(p)
				for _, key := range keys {
					k.Allow(key)
				}
				runtime.GC()
			}
			denied := scalingLoop(b, k, keys, seq, parallel)
			reportDenied(b, denied)
		})
		if stop != nil {
			stop()
		}
		k, stop = nil, nil
	}
}

// ---------------------------------------------------------------------------
// 3. New keys: every op is a key the limiter has never seen. The key
// strings are pre-generated (K of them); after K inserts the limiter is
// replaced by a fresh one with the timer stopped, so memory stays bounded
// and every key is still new to the limiter that sees it.

func BenchmarkNewKeyInsert(b *testing.B) {
	nk := numKeys(b)
	keys := keySet(nk)
	p := mostlyAllow
	p.Keys = nk
	for _, im := range keyedImpls() {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			var (
				k      keyed
				stop   = noop
				denied int64
			)
			b.Cleanup(func() { stop() })
			j := nk
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if j == nk {
					b.StopTimer()
					stop()
					k = nil
					runtime.GC()
					k, stop = im.make(p)
					j = 0
					b.StartTimer()
				}
				if !k.Allow(keys[j]) {
					denied++
				}
				j++
			}
			b.StopTimer()
			reportDenied(b, denied)
		})
	}
}

// ---------------------------------------------------------------------------
// 4. Heap per key. One op inserts K keys into a fresh limiter; the live
// heap after a GC is compared with the live heap before, and the
// difference per key is reported as B/key (averaged over the ops). Each
// key is a freshly allocated string that the harness drops, so a limiter
// that keeps the caller's string pays for it (as it would in a server,
// where keys come out of requests) and one that keeps only a hash does
// not. ns/op, B/op and allocs/op are per K inserts, including the one
// allocation per key the harness makes for that string.

func BenchmarkHeapPerKey(b *testing.B) {
	nk := numKeys(b)
	p := mostlyAllow
	p.Keys = nk
	for _, im := range keyedImpls() {
		b.Run("impl="+im.name, func(b *testing.B) {
			b.ReportAllocs()
			var (
				retained      float64
				before, after runtime.MemStats
				buf           = make([]byte, 0, 32)
			)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&before)
				b.StartTimer()

				k, stop := im.make(p)
				for j := 0; j < nk; j++ {
					buf = appendKey(buf[:0], j)
					k.Allow(string(buf))
				}

				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				runtime.KeepAlive(k)
				stop()
				retained += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
				k = nil
				b.StartTimer()
			}
			b.StopTimer()
			b.ReportMetric(retained/float64(b.N)/float64(nk), "B/key")
		})
	}
}

// ---------------------------------------------------------------------------
// 5. Floors: what the cheapest possible decision is made of.

var (
	sinkU64  uint64
	sinkDur  time.Duration
	sinkTime time.Time
	sinkBool bool
)

func BenchmarkFloor(b *testing.B) {
	b.Run("op=time.Since", func(b *testing.B) {
		b.ReportAllocs()
		origin := time.Now()
		var d time.Duration
		for b.Loop() {
			d += time.Since(origin)
		}
		sinkDur = d
	})
	b.Run("op=time.Now", func(b *testing.B) {
		b.ReportAllocs()
		var t time.Time
		for b.Loop() {
			t = time.Now()
		}
		sinkTime = t
	})
	b.Run("op=xxhash.Sum64String-12B", func(b *testing.B) {
		b.ReportAllocs()
		key := "user:0000042" // 12 bytes
		var h uint64
		for b.Loop() {
			h += xxhash.Sum64String(key)
		}
		sinkU64 = h
	})
	// The ManyKeysUniformSerial loop with a limiter that only hashes the
	// key: what the harness itself costs per decision (the key's string
	// header and bytes are two cache misses at 1,000,000 keys).
	b.Run("op=harness-uniform-hash", func(b *testing.B) {
		b.ReportAllocs()
		nk := numKeys(b)
		keys, seq := keySet(nk), indexSeq(uniform, nk)
		const mask = seqLen - 1
		var h uint64
		i := 0
		for b.Loop() {
			h += xxhash.Sum64String(keys[seq[i&mask]])
			i++
		}
		sinkU64 = h
	})
	b.Run("op=atomic.CAS-uncontended", func(b *testing.B) {
		b.ReportAllocs()
		var u atomic.Uint64
		v := u.Load()
		ok := true
		for b.Loop() {
			ok = ok && u.CompareAndSwap(v, v+1)
			v++
		}
		sinkBool = ok
	})
}
