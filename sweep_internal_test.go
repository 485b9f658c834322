package hotlimit

import (
	"testing"
	"time"
)

// A refund on an older reading that lands between the sweep's judging a
// word fresh and its retiring CAS leaves the word fresh: the sweep must
// still remove the entry, as Sweep's doc promises ("every key whose state
// is fresh now"), and not skip it because its CAS failed.
func TestSweepRetriesAFreshWordChangedByARefund(t *testing.T) {
	clock := NewManualClock()
	lim, err := New(FixedWindow{Limit: 3, Window: 50 * time.Microsecond},
		WithClock(clock), WithShards(1), WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()

	clock.Set(989_859 * time.Nanosecond) // window 19
	var a Admission
	if d := lim.AdmitN(&a, "k", 1); !d.Allowed {
		t.Fatalf("AdmitN(1) = %+v, want admitted", d)
	}
	if d := lim.AllowN("k", 2); !d.Allowed {
		t.Fatalf("AllowN(3) = %+v, want admitted", d)
	}
	clock.Set(time.Millisecond) // window 20: the key is fresh
	refunded := false
	sweepJudgedHook = func() {
		if refunded {
			return
		}
		refunded = true
		// A refund whose reading is older than the sweep's: window 19,
		// count 3 → 2, still fresh at the sweep's instant.
		clock.Set(998_950 * time.Nanosecond)
		a.Refund()
		clock.Set(time.Millisecond)
	}
	defer func() { sweepJudgedHook = nil }()

	if n := lim.Sweep(); n != 1 || !refunded {
		t.Fatalf("Sweep() = %d (refund ran: %v), want 1 key removed", n, refunded)
	}
	if n := lim.Len(); n != 0 {
		t.Fatalf("Len() = %d after the sweep, want 0", n)
	}
}
