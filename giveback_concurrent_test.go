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
				whileRunning(func() {
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
				}, func(int) { l.Sweep() })
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

// refundInBatches runs 8 goroutines of 100 unit requests on key "k": every
// third is kept (allowed, kept(d) is called with its Decision) and the
// others are admitted with AdmitN and refunded four at a time, so that
// other goroutines' requests and the caller's SetPolicy calls land
// between an admission and its give-back.
func refundInBatches(l *hotlimit.Limiter, kept func(hotlimit.Decision)) {
	inParallel(8, func(g int) {
		var held [4]hotlimit.Admission
		n := 0
		for i := range 100 {
			if (g+i)%3 == 0 {
				if d := l.AllowN("k", 1); d.Allowed {
					kept(d)
				}
			} else if l.AdmitN(&held[n], "k", 1).Allowed {
				n++
			}
			if n == len(held) || i == 99 {
				for j := range n {
					held[j].Refund()
				}
				n = 0
			}
		}
	})
}

// whileRunning calls each(i), i = 0, 1, …, in a goroutine until body
// returns.
func whileRunning(body func(), each func(i int)) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				each(i)
			}
		}
	}()
	body()
	close(stop)
	<-done
}

// TestRefundsUnderSetPolicyExact: refunds racing SetPolicy calls that
// switch the Limit between 5 and 3 (the same rate or window, so a kept
// unit weighs the same under both) and a sweeper, at one frozen instant.
// Every refund gives back its whole admission through the tables'
// rebuilds, so the key then admits exactly max(0, Limit − kept).
func TestRefundsUnderSetPolicyExact(t *testing.T) {
	for name, pp := range map[string][2]hotlimit.Policy{
		"TokenBucket":   {hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 5}, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 3}},
		"LeakyBucket":   {hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 4}, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 2}},
		"FixedWindow":   {hotlimit.FixedWindow{Limit: 5, Window: time.Hour}, hotlimit.FixedWindow{Limit: 3, Window: time.Hour}},
		"SlidingWindow": {hotlimit.SlidingWindow{Limit: 5, Window: time.Hour}, hotlimit.SlidingWindow{Limit: 3, Window: time.Hour}},
		"SlidingLog":    {hotlimit.SlidingLog{Limit: 5, Window: time.Hour}, hotlimit.SlidingLog{Limit: 3, Window: time.Hour}},
	} {
		t.Run(name, func(t *testing.T) {
			for round := range 20 {
				l, c := newManual(t, pp[0])
				c.Set(time.Hour + 7*time.Millisecond)
				var kept atomic.Int64
				whileRunning(func() {
					refundInBatches(l, func(hotlimit.Decision) { kept.Add(1) })
				}, func(i int) {
					if err := l.SetPolicy(pp[i%2]); err != nil {
						t.Error(err)
					}
					l.Sweep()
				})
				n, lim := kept.Load(), l.Limit()
				if after := drain(t, l, "k"); n > 5 || after != max(0, lim-n) {
					t.Fatalf("round %d: %d kept, then %d admitted under Limit %d; want %d", round, n, after, lim, max(0, lim-n))
				}
			}
		})
	}
}

// TestRefundsUnderRateChangeExact: as above, with SetPolicy switching a
// token bucket between 100/s, Burst 5 and 50/s, Burst 4. A kept unit adds
// 10 ms or 20 ms to the key's TAT, as its Decision's Limit tells, and a
// refund gives back what its own admission added whatever the rate is
// now, so the key's debt is exactly the sum of the kept units'. (Given
// back at the rate in force at the refund, it was off by 10 ms in about
// one round of 30.)
func TestRefundsUnderRateChangeExact(t *testing.T) {
	p1 := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 5}
	p2 := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(50), Burst: 4}
	interval := map[int64]int64{5: int64(10 * time.Millisecond), 4: int64(20 * time.Millisecond)}
	for round := range 40 {
		l, c := newManual(t, p1)
		c.Set(time.Hour + 7*time.Millisecond)
		var debt atomic.Int64
		whileRunning(func() {
			refundInBatches(l, func(d hotlimit.Decision) { debt.Add(interval[d.Limit]) })
		}, func(i int) {
			if err := l.SetPolicy([]hotlimit.Policy{p2, p1}[i%2]); err != nil {
				t.Error(err)
			}
			l.Sweep()
		})
		lim := l.Limit()
		tf := interval[lim]
		want := max(0, (lim*tf-debt.Load())/tf)
		if got := l.Check("k", 0); got.Remaining != want || got.ResetAfter != time.Duration(debt.Load()) {
			t.Fatalf("round %d: kept units' debt %v, Limit %d: %+v; want Remaining %d, ResetAfter the debt", round, time.Duration(debt.Load()), lim, got, want)
		}
	}
}
