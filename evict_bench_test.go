package hotlimit_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/hotlimit/hotlimit"
)

// BenchmarkNewKeyEvicting: every op is a new key into a full limiter
// (WithMaxKeys(K)), so every op evicts one entry; the clock is frozen and
// every key holds 1 of 10 units, so each eviction compares equals. K of 1,
// 2 and 16 use the default shard count, which a small K lowers.
func BenchmarkNewKeyEvicting(b *testing.B) {
	for _, k := range []int{1, 2, 16, 1000, 100_000} {
		b.Run(fmt.Sprint("keys=", k), func(b *testing.B) {
			l, _ := newManual(b, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 10}, hotlimit.WithMaxKeys(k))
			keys := make([]string, 1<<20)
			for i := range keys {
				keys[i] = "flood:" + strconv.Itoa(i)
			}
			for i := range k {
				l.Allow("fill:" + strconv.Itoa(i))
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l.Allow(keys[i&(1<<20-1)])
				i++
			}
		})
	}
}
