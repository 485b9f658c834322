package hotlimit_test

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// benchKeys is the key count of the memory and sweep benchmarks:
// 1,000,000, or HOTLIMIT_BENCH_KEYS.
func benchKeys() int {
	if s := os.Getenv("HOTLIMIT_BENCH_KEYS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeapPerKey reports the live heap per key with K keys of the
// form user:NNNNNN (key bytes included), and the live heap after those keys
// go idle and one sweep runs, as a percentage of the empty limiter's.
func BenchmarkHeapPerKey(b *testing.B) {
	k := benchKeys()
	keys := make([]string, k)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%06d", i)
	}
	for b.Loop() {
		c := hotlimit.NewManualClock()
		base := liveHeap()
		l, _ := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 10}, hotlimit.WithClock(c), hotlimit.WithSweepInterval(0))
		empty := liveHeap()
		for _, key := range keys {
			l.Allow(key)
		}
		full := liveHeap()
		c.Advance(time.Second)
		l.Sweep()
		after := liveHeap()
		b.ReportMetric(float64(full-empty)/float64(k), "B/key")
		b.ReportMetric(100*float64(after-base)/float64(empty-base), "after-sweep-%-of-empty")
		runtime.KeepAlive(l)
		l.Close()
	}
}

// BenchmarkAllowDuringSweep measures the latency of single decisions on
// existing keys while a sweep of K idle keys runs on the other core, beside
// the same loop without a sweep. It reports the p99 and the worst latency.
// Its body runs once per b.N: use -benchtime 1x.
func BenchmarkAllowDuringSweep(b *testing.B) {
	k := benchKeys()
	for _, sweeping := range []bool{false, true} {
		b.Run(fmt.Sprintf("sweep=%v", sweeping), func(b *testing.B) {
			c := hotlimit.NewManualClock()
			l, _ := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1_000_000), Burst: 1 << 30}, hotlimit.WithClock(c), hotlimit.WithSweepInterval(0))
			defer l.Close()
			for i := range k {
				l.Allow("idle:" + strconv.Itoa(i))
			}
			live := make([]string, 1024)
			for i := range live {
				live[i] = "live:" + strconv.Itoa(i)
				l.AllowN(live[i], 1<<29) // far from fresh: never swept
			}
			c.Advance(time.Second) // every idle key is fresh now
			// With a sweep, decide for as long as the sweep runs; without,
			// for 2^18 decisions. b.N is 1: the figures are the metrics.
			lat := make([]time.Duration, 0, 1<<22)
			done := make(chan struct{})
			if sweeping {
				go func() { l.Sweep(); close(done) }()
			}
			for i := 0; len(lat) < cap(lat); i++ {
				if sweeping {
					select {
					case <-done:
						goto out
					default:
					}
				} else if i == 1<<18 {
					break
				}
				t0 := time.Now()
				l.Allow(live[i&1023])
				lat = append(lat, time.Since(t0))
			}
		out:
			if sweeping {
				<-done
				if l.Len() != len(live) {
					b.Fatalf("Len() = %d after sweep, want %d", l.Len(), len(live))
				}
			}
			b.ReportMetric(float64(len(lat)), "decisions")
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)*99/100]), "p99-ns")
				b.ReportMetric(float64(lat[len(lat)-1]), "max-ns")
			}
		})
	}
}
