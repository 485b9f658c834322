package hotlimit_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestRenewalsGoWithTheirKeys: a flood of distinct keys, each given back
// below a later admission (so each is renewed and its shard remembers a
// floor for it), then swept once every key is fresh, leaves the limiter
// holding what an empty one holds: the renewals of removed keys are
// forgotten with them, and MemStats, a gauge that goes down when keys go,
// says so.
func TestRenewalsGoWithTheirKeys(t *testing.T) {
	for name, p := range orderPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p, hotlimit.WithShards(4))
			empty := l.MemStats()
			const n = 20_000
			for i := range n {
				key := "k" + strconv.Itoa(i)
				var a, b hotlimit.Admission
				if !l.AdmitN(&a, key, 1).Allowed || !l.AdmitN(&b, key, 1).Allowed {
					t.Fatal("a new key refused 2 units")
				}
				a.Refund() // below b's unit: a renewal
			}
			full := l.MemStats()
			c.Advance(time.Hour)
			if got := l.Sweep(); got != n {
				t.Fatalf("swept %d of %d fresh keys", got, n)
			}
			if swept := l.MemStats(); swept != empty {
				t.Errorf("MemStats %+v with no key left (%+v with %d), want what an empty limiter holds, %+v", swept, full, n, empty)
			}
		})
	}
}

// TestRenewalsBoundedUnderFlood: under WithMaxKeys a flood of distinct
// keys, each given back below a later admission (a renewal each) and each
// left owing, holds no more memory after 60,000 keys than after 10,000
// (18,000 and 3,000 under the race detector), give or take the renewals
// of the 64 keys held: the renewals of evicted keys are forgotten as the
// flood goes on. A shard keeps at most 2·live+9 renewals, so the 4 shards
// hold at most 2·64 + 4·9 = 164 of about 480 B, 79 KB: MemStats, which
// counts them, stays within 256 KB of an empty limiter's, and so does what
// the heap grows by between the two counts.
func TestRenewalsBoundedUnderFlood(t *testing.T) {
	l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 4}, hotlimit.WithShards(4), hotlimit.WithMaxKeys(64))
	empty := l.MemStats()
	flood := func(from, to int) {
		for i := from; i < to; i++ {
			key := "k" + strconv.Itoa(i)
			var a, b hotlimit.Admission
			if !l.AdmitN(&a, key, 1).Allowed || !l.AdmitN(&b, key, 1).Allowed {
				t.Fatal("a new key refused 2 units")
			}
			a.Refund() // below b's unit: a renewal; b's stays
		}
	}
	n := 10_000 // a sixth of the flood; fewer under the race detector, still megabytes if the renewals stayed
	if raceEnabled {
		n = 3_000
	}
	flood(0, n)
	heap := heapAfterGC()
	flood(n, 6*n)
	heap2, ms := heapAfterGC(), l.MemStats()
	if st := l.Stats(); st.Evicted < uint64(5*n) {
		t.Fatalf("%d evictions of %d keys into 64", st.Evicted, 6*n)
	}
	if ms.Total > empty.Total+256<<10 {
		t.Errorf("MemStats %+v after %d keys into 64, %+v empty: the renewals grew with the flood", ms, 6*n, empty)
	}
	if grew := int64(heap2) - int64(heap); grew > 256<<10 {
		t.Errorf("the heap grew by %d B from %d keys to %d (MemStats %d)", grew, n, 6*n, ms.Total)
	}
	runtime.KeepAlive(l)
}
