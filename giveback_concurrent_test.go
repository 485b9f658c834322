package hotlimit_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestRefundsUnderSweepExact: at one frozen instant, 8 goroutines admit
// unit requests on one key and refund two of every three while another
// goroutine sweeps without pause. A refund at the instant of its
// admission owes its whole cost, and a sweep removes only an entry that
// owes nothing, which no outstanding admission's entry does, so under any
// schedule the admissions kept plus what the key admits after add up to
// exactly its Limit.
func TestRefundsUnderSweepExact(t *testing.T) {
	for name, p := range giveBackPolicies {
		t.Run(name, func(t *testing.T) {
			for round := range 10 {
				l, c := newManual(t, p)
				c.Set(time.Hour + 7*time.Millisecond)
				var kept atomic.Int64
				stop, swept := make(chan struct{}), make(chan struct{})
				go func() {
					defer close(swept)
					for {
						select {
						case <-stop:
							return
						default:
							l.Sweep()
						}
					}
				}()
				inParallel(8, func(g int) {
					for i := range 100 {
						var a hotlimit.Admission
						if !l.AdmitN(&a, "k", 1).Allowed {
							continue
						}
						if (g+i)%3 == 0 {
							kept.Add(1)
						} else if !a.Refund() {
							t.Error("the first Refund of an admission did not spend it")
						}
					}
				})
				close(stop)
				<-swept
				if n, after := kept.Load(), drain(t, l, "k"); n+after != l.Limit() {
					t.Fatalf("round %d: %d admissions kept and %d admitted after, want %d in all (%+v)", round, n, after, l.Limit(), l.Stats())
				}
			}
		})
	}
}

// TestAdmitNHoldsNothingUnlessAdmitted: AdmitN with a cost of 0 (a peek),
// a negative cost, a cost above the Limit, or a key above MaxKeyLen
// records nothing: its Refund does nothing, counts nothing and creates no
// entry. Keys of length 0 and MaxKeyLen are given back whole, and the
// entry goes with the refund that leaves it fresh.
func TestAdmitNHoldsNothingUnlessAdmitted(t *testing.T) {
	long := string(make([]byte, hotlimit.MaxKeyLen))
	for name, p := range giveBackPolicies {
		t.Run(name, func(t *testing.T) {
			l, c := newManual(t, p)
			c.Set(time.Hour)
			for _, cost := range []int64{0, -1, 6, 1 << 62} {
				for _, key := range []string{"", "k", long, long + "x"} {
					var a hotlimit.Admission
					if d := l.AdmitN(&a, key, cost); a.Refund() {
						t.Errorf("cost %d, key of %d bytes: Refund after %+v gave something back", cost, len(key), d)
					}
				}
			}
			if s := l.Stats(); s.Refunded != 0 || s.Keys != 0 || l.Len() != 0 {
				t.Errorf("after requests that hold nothing: %+v, Len %d", s, l.Len())
			}
			for _, key := range []string{"", long} {
				var a hotlimit.Admission
				if d := l.AdmitN(&a, key, 5); !d.Allowed {
					t.Fatalf("key of %d bytes: AdmitN(5) = %+v", len(key), d)
				}
				if !a.Refund() {
					t.Fatalf("key of %d bytes: the Refund did not spend the admission", len(key))
				}
				if l.Len() != 0 {
					t.Errorf("key of %d bytes: Len %d after a refund that left it fresh", len(key), l.Len())
				}
				if n := drain(t, l, key); n != 5 {
					t.Errorf("key of %d bytes: admits %d after the refund, want 5", len(key), n)
				}
				l.Reset(key)
			}
		})
	}
}
