package hotlimit_test

import (
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
