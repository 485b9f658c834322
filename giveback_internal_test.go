package hotlimit

import (
	"testing"
	"time"
)

// TestGiveBackReadsTheClockAfterTheWord: a give-back's instant is never
// older than a decision its CAS builds on. Between the give-back's clock
// read and its CAS, the clock moves 20 ms (two units of the bucket, which
// the admission's units refill) and the key is drained; the CAS then fails
// and the give-back must decide again on a new reading, which owes the
// admission only what it still holds then: at that instant the key admits
// exactly Burst units, minus the one unit not given back that has not
// drained. Another unit keeps the give-back from leaving the state fresh:
// taken before the admission (and drained 10 ms before the reading, so
// the admission's second unit is still held and comes back), the give-back
// starts lock-free (refundAt) and, once the drain has put units above it,
// ends under the mutex; taken after (and not drained), it lands below that
// unit from the start and renews the entry under the mutex (refundLocked).
func TestGiveBackReadsTheClockAfterTheWord(t *testing.T) {
	for _, p := range []Policy{
		TokenBucket{Rate: PerSecond(100), Burst: 5},
		LeakyBucket{Rate: PerSecond(100), Capacity: 4},
	} {
		for _, below := range []bool{false, true} {
			clock := NewManualClock()
			clock.Set(time.Hour)
			l, err := New(p, WithClock(clock), WithSweepInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			var a Admission
			if !below {
				l.AllowN("k", 1)
			}
			l.AdmitN(&a, "k", 2)
			if below {
				l.AllowN("k", 1)
			}
			drained, hooked := int64(0), false
			giveBackReadHook = func() {
				if !hooked {
					hooked = true
					clock.Advance(20 * time.Millisecond)
					for l.Allow("k").Allowed { // lock-free: the key is held
						drained++
					}
				}
			}
			a.Refund()
			giveBackReadHook = nil
			after := int64(0)
			for l.Allow("k").Allowed {
				after++
			}
			want := int64(5) // the other unit has drained
			if below {
				want = 4 // it has not
			}
			if !hooked || drained+after != want {
				t.Errorf("%T, give-back below the other unit %v: %d admitted by the drain (hook run: %v) and %d after the give-back, at one instant; want %d", p, below, drained, hooked, after, want)
			}
			l.Close()
		}
	}
}

// TestRenewalsPruned: the renewals of entries that are gone are forgotten
// (the map stays within 2·live+9 entries), and a live entry's floor
// survives the pruning: its earlier record still gives back in full at
// the renewal's instant.
func TestRenewalsPruned(t *testing.T) {
	clock := NewManualClock()
	clock.Set(time.Hour)
	l, err := New(TokenBucket{Rate: PerSecond(10), Burst: 4}, WithClock(clock), WithSweepInterval(0), WithShards(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	renew := func(key string) *Admission {
		var a, b Admission
		l.AdmitN(&a, key, 2)
		l.AdmitN(&b, key, 2)
		a.Refund() // below b: renews key
		return &b
	}
	b := renew("live")
	s := &l.shards[0]
	for i := range 100 {
		key := "gone" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		renew(key)
		l.Reset(key)
		s.mu.Lock()
		n, live := len(s.renewals), s.tab.Load().count
		s.mu.Unlock()
		if n > 2*live+9 {
			t.Fatalf("after %d renewed keys reset: %d renewals kept for %d live entries", i+1, n, live)
		}
	}
	if !b.Refund() {
		t.Fatal("b's Refund did not spend it")
	}
	if got := l.AllowN("live", 0).Remaining; got != 4 {
		t.Fatalf("\"live\" has %d units left after both its admissions came back; want 4", got)
	}
}
