package bench

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// How cost grows with the number of keys: the many-keys workloads at
// several key counts, for hotlimit, the baseline and the keyed peer that
// was fastest in most many-keys rows at 1,000,000 keys (RESULTS.md), with
// the live heap per key after filling. Rows are named
// Scaling/keys=K/dist=D/mode=M/impl=I, so `benchstat -col /impl` puts the
// implementations side by side.

// scalingImpls are the implementations compared at every key count.
var scalingImpls = []string{"xrate-map-mutex", "hotlimit", "sethvargo-memorystore"}

// scalingKeys reads HOTLIMIT_BENCH_SCALE, a comma-separated list of key
// counts (e.g. 10000,100000,1000000,10000000); without it, the one count
// numKeys returns (10,000 in CI).
func scalingKeys(tb testing.TB) []int {
	s := os.Getenv("HOTLIMIT_BENCH_SCALE")
	if s == "" {
		return []int{numKeys(tb)}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			tb.Fatalf("HOTLIMIT_BENCH_SCALE=%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out
}

// keysLabel writes a key count as 10k, 1M, 10M.
func keysLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return strconv.Itoa(n)
}

func BenchmarkScaling(b *testing.B) {
	impls := map[string]impl{}
	for _, im := range keyedImpls() {
		impls[im.name] = im
	}
	for _, nk := range scalingKeys(b) {
		keys := keySet(nk)
		seqs := [2][]int32{indexSeq(uniform, nk), indexSeq(zipf, nk)}
		p := mostlyAllow
		p.Keys = nk
		for _, name := range scalingImpls {
			im, ok := impls[name]
			if !ok {
				b.Fatalf("no implementation %q", name)
			}
			// Fill once per key count and implementation, untimed, with a
			// fresh string per key (as HeapPerKey does), and measure the live
			// heap the limiter holds.
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			k, stop := im.make(p)
			buf := make([]byte, 0, 32)
			for j := range nk {
				buf = appendKey(buf[:0], j)
				k.Allow(string(buf))
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			perKey := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(nk)
			for d, dist := range []distribution{uniform, zipf} {
				for _, parallel := range []bool{false, true} {
					mode := "Serial"
					if parallel {
						mode = "Parallel"
					}
					name := fmt.Sprintf("keys=%s/dist=%v/mode=%s/impl=%s", keysLabel(nk), dist, mode, im.name)
					b.Run(name, func(b *testing.B) {
						b.ReportAllocs()
						denied := scalingLoop(b, k, keys, seqs[d], parallel)
						reportDenied(b, denied)
						b.ReportMetric(perKey, "B/key")
					})
				}
			}
			runtime.KeepAlive(k)
			stop()
		}
	}
}

// scalingLoop is the many-keys loop (ManyKeys and Scaling): keys picked from a pre-generated
// index sequence, each parallel goroutine from its own offset.
func scalingLoop(b *testing.B, k keyed, keys []string, seq []int32, parallel bool) (denied int64) {
	const mask = seqLen - 1
	if !parallel {
		i := 0
		for b.Loop() {
			if !k.Allow(keys[seq[i&mask]]) {
				denied++
			}
			i++
		}
		return denied
	}
	var total, g atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(g.Add(1)) * (seqLen/16 + 7919)
		var dn int64
		for pb.Next() {
			if !k.Allow(keys[seq[i&mask]]) {
				dn++
			}
			i++
		}
		total.Add(dn)
	})
	b.StopTimer()
	return total.Load()
}
