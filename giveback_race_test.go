package hotlimit_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestRenewalsUnderRebuildsExact: at one frozen instant, 6 goroutines
// admit on 3 keys of one shard and give back a random one of the up to 4
// Admissions each holds (most below later admissions: renewals), each
// give-back made by two goroutines at once (exactly one Refund spends
// it), while another goroutine switches the Burst with SetPolicy (a
// conversion rebuilds the table), inserts and resets decoy keys (the
// table grows and is purged of tombstones), and sweeps. Once all have
// returned, each key's kept units plus its Remaining are exactly the
// Limit: no renewal lost a unit or gave one twice across the rebuilds.
func TestRenewalsUnderRebuildsExact(t *testing.T) {
	for name, pp := range map[string][2]hotlimit.Policy{
		"TokenBucket": {hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 200}, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 150}},
		"LeakyBucket": {hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 199}, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 149}},
	} {
		t.Run(name, func(t *testing.T) {
			rounds := 10
			if raceEnabled {
				rounds = 3
			}
			for round := range rounds {
				l, c := newManual(t, pp[0], hotlimit.WithShards(1))
				c.Set(time.Hour + 7*time.Millisecond)
				keys := []string{"k0", "k1", "a-key-longer-than-15-bytes"}
				var kept [3]atomic.Int64
				var workers sync.WaitGroup
				stop := make(chan struct{})
				var disturber sync.WaitGroup
				disturber.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						if err := l.SetPolicy(pp[i%2]); err != nil {
							t.Error(err)
						}
						for j := range 40 {
							l.Allow(fmt.Sprint("decoy-", i, "-", j))
						}
						for j := range 40 {
							l.Reset(fmt.Sprint("decoy-", i, "-", j))
						}
						l.Sweep()
					}
				})
				for g := range 6 {
					workers.Go(func() {
						r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
						type held struct {
							k    int
							cost int64
						}
						holdAtRandom(r, 300, 4, func(_ int, a *hotlimit.Admission) (held, bool) {
							k, cost := r.IntN(len(keys)), 1+r.Int64N(2)
							return held{k, cost}, l.AdmitN(a, keys[k], cost).Allowed
						}, func(_ int, h held, a *hotlimit.Admission) {
							if r.IntN(40) == 0 && kept[h.k].Load() < 40 {
								kept[h.k].Add(h.cost)
								return
							}
							var spent atomic.Int32
							inParallel(2, func(int) {
								if a.Refund() {
									spent.Add(1)
								}
							})
							if n := spent.Load(); n != 1 {
								t.Errorf("two concurrent Refunds of one Admission spent it %d times", n)
							}
						})
					})
				}
				workers.Wait()
				close(stop)
				disturber.Wait()
				if err := l.SetPolicy(pp[0]); err != nil {
					t.Fatal(err)
				}
				for k, key := range keys {
					if n, left := kept[k].Load(), l.Check(key, 0).Remaining; n+left != l.Limit() {
						t.Errorf("round %d, %q: %d units kept and %d left, want %d in all (%+v)", round, key, n, left, l.Limit(), l.Stats())
					}
				}
			}
		})
	}
}

// TestGiveBackBoundMovingClock: 6 goroutines admit on one key of a small,
// fast bucket (a TokenBucket of Burst 4 or a LeakyBucket of Capacity 3,
// 100/s) and give back a random one of the up to 3
// Admissions each holds, keeping a quarter, and each moves the clock on
// 1 ms every 8 steps. Each admission is known to be decided at a
// reading between the clock's readings before and after its call, so the
// kept admissions whose calls both began and ended within [t1, t2] were
// decided in it, and they cost at most Burst + (t2 − t1)/T units: a bound
// that holds under any schedule, and that a give-back returning units
// that had drained, or a later admission's, breaks.
func TestGiveBackBoundMovingClock(t *testing.T) {
	const T, tau = int64(10 * time.Millisecond), int64(40 * time.Millisecond)
	rounds := 10
	if raceEnabled {
		rounds = 3
	}
	for round := range 4 * rounds {
		var p hotlimit.Policy = hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 4}
		if round%2 == 1 {
			p = hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(100), Capacity: 3}
		}
		all := keptMovingClock(t, p, round, round%4 >= 2)
		for _, first := range all {
			t1 := first.before
			var sum int64
			for _, k := range all { // by the end of their calls
				if k.before < t1 || k.seg != first.seg || k.seg < 0 {
					continue
				}
				sum += k.cost
				if t2 := k.after; sum*T > tau+(t2-t1) {
					t.Fatalf("%T, round %d: %d units kept by calls within [%v, %v]; the bucket allows %d + %v/T",
						p, round, sum, time.Duration(t1), time.Duration(t2), tau/T, time.Duration(t2-t1))
				}
			}
		}
	}
}

// TestGiveBackWindowsMovingClock is TestGiveBackBoundMovingClock for the
// windows of 50 ms and Limit 4: the kept admissions whose calls lie within
// one window [k·W, (k+1)·W) (FixedWindow, SlidingWindow), or within one
// trailing window (t − W, t] (SlidingLog), cost at most 4.
func TestGiveBackWindowsMovingClock(t *testing.T) {
	const w = int64(50 * time.Millisecond)
	rounds := 10
	if raceEnabled {
		rounds = 3
	}
	for _, p := range []hotlimit.Policy{
		hotlimit.FixedWindow{Limit: 4, Window: time.Duration(w)},
		hotlimit.SlidingWindow{Limit: 4, Window: time.Duration(w)},
		hotlimit.SlidingLog{Limit: 4, Window: time.Duration(w)},
	} {
		_, trailing := p.(hotlimit.SlidingLog)
		for round := range 2 * rounds {
			all := keptMovingClock(t, p, round, round%2 == 1)
			for _, last := range all {
				var sum int64
				for _, k := range all {
					if k.seg < 0 || k.seg != last.seg {
						continue
					}
					if trailing && k.before > last.after-w && k.after <= last.after ||
						!trailing && k.before/w == last.after/w && k.after/w == last.after/w {
						sum += k.cost
					}
				}
				if sum > 4 {
					t.Fatalf("%T, round %d: %d units kept by calls within the window of %v; the limit is 4", p, round, sum, time.Duration(last.after))
				}
			}
		}
	}
}

// movingKept is an admission kept by keptMovingClock: the clock's readings
// before and after its call, its cost, and the Resets (and insertions that
// may evict it) that had returned before its call, or −1 if one ran while
// it did.
type movingKept struct{ before, after, cost, seg int64 }

// keptMovingClock runs 6 goroutines on key "k" of a new limiter for p on
// a ManualClock: each holds up to 3 Admissions, gives back a random one
// (keeping a quarter) and moves the clock on 1 ms every 8 steps. With
// resets, under WithMaxKeys(2), another goroutine meanwhile resets "k" or
// inserts a new key (which evicts "k" or the key before), sweeps and
// converts the table with SetPolicy(p), over and over. It returns the admissions kept,
// by the end of their calls.
func keptMovingClock(t *testing.T, p hotlimit.Policy, round int, resets bool) []movingKept {
	var opts []hotlimit.Option
	if resets {
		opts = append(opts, hotlimit.WithMaxKeys(2))
	}
	l, c := newManual(t, p, opts...)
	c.Set(time.Hour)
	var mu sync.Mutex
	var all []movingKept
	var workers, disturber sync.WaitGroup
	var begun, ended atomic.Int64 // Resets begun, and returned
	stop := make(chan struct{})
	if resets {
		disturber.Go(func() {
			for i := range 10_000 {
				select {
				case <-stop:
					return
				default:
				}
				switch i % 8 {
				case 0:
					begun.Add(1)
					l.Reset("k")
					ended.Add(1)
				case 4:
					begun.Add(1)
					l.Allow(fmt.Sprint("decoy-", i)) // evicts "k" or the decoy before
					ended.Add(1)
				}
				l.Sweep()
				if err := l.SetPolicy(p); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for g := range 6 {
		workers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
			var mine []movingKept
			tick := func(i int) {
				if i%8 == 0 {
					c.Advance(time.Millisecond)
				}
			}
			holdAtRandom(r, 600, 3, func(i int, a *hotlimit.Admission) (movingKept, bool) {
				tick(i)
				cost := 1 + r.Int64N(2)
				seg, before := ended.Load(), int64(c.Now())
				ok := l.AdmitN(a, "k", cost).Allowed
				after := int64(c.Now())
				if begun.Load() != seg {
					seg = -1 // a Reset ran meanwhile: before it or after
				}
				return movingKept{before, after, cost, seg}, ok
			}, func(i int, k movingKept, a *hotlimit.Admission) {
				tick(i)
				if r.IntN(4) == 0 {
					mine = append(mine, k)
				} else {
					a.Refund()
				}
			})
			mu.Lock()
			all = append(all, mine...)
			mu.Unlock()
		})
	}
	workers.Wait()
	close(stop)
	disturber.Wait()
	slices.SortFunc(all, func(a, b movingKept) int { return int(a.after - b.after) })
	return all
}

// TestRenewalsUnderRateChangeExact: at one frozen instant, 6 goroutines
// give back random ones of the up to 4 Admissions each holds on one key
// (renewals, many more than the 16 an entry keeps, so older records are
// taken from the floor), while another goroutine switches the rate
// between 100/s and 50/s. A kept unit weighs the interval it was decided
// at (10 ms or 20 ms, as its Decision's Limit tells), and every give-back
// returns what its own admission added, so the key's debt is exactly the
// kept units' weight.
func TestRenewalsUnderRateChangeExact(t *testing.T) {
	p1 := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 200}
	p2 := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(50), Burst: 150}
	interval := map[int64]int64{200: int64(10 * time.Millisecond), 150: int64(20 * time.Millisecond)}
	rounds := 10
	if raceEnabled {
		rounds = 3
	}
	for round := range rounds {
		l, c := newManual(t, p1)
		c.Set(time.Hour + 7*time.Millisecond)
		var debt atomic.Int64
		var workers, disturber sync.WaitGroup
		stop := make(chan struct{})
		disturber.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := l.SetPolicy([]hotlimit.Policy{p2, p1}[i%2]); err != nil {
					t.Error(err)
					return
				}
			}
		})
		for g := range 6 {
			workers.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(g)))
				holdAtRandom(r, 300, 4, func(_ int, a *hotlimit.Admission) (int64, bool) {
					cost := 1 + r.Int64N(2)
					d := l.AdmitN(a, "k", cost)
					return cost * interval[d.Limit], d.Allowed
				}, func(_ int, weight int64, a *hotlimit.Admission) {
					if r.IntN(40) == 0 {
						debt.Add(weight)
					} else {
						a.Refund()
					}
				})
			})
		}
		workers.Wait()
		close(stop)
		disturber.Wait()
		if got := l.Check("k", 0).ResetAfter; got != time.Duration(debt.Load()) {
			t.Fatalf("round %d: the key owes %v; the kept units weigh %v (%+v)", round, got, time.Duration(debt.Load()), l.Stats())
		}
	}
}

// holdAtRandom is one goroutine's part in the give-back races. For steps
// steps (i), it fills a new Admission through admit while it holds fewer
// than most, and otherwise takes a random one of those it holds out and
// hands it to done, which keeps it or gives it back; at the end it gives
// back what it still holds. admit returns what done gets with the
// Admission, and whether it was admitted.
func holdAtRandom[H any](r *rand.Rand, steps, most int, admit func(i int, a *hotlimit.Admission) (H, bool), done func(i int, h H, a *hotlimit.Admission)) {
	type held struct {
		a *hotlimit.Admission
		h H
	}
	var hs []held
	for i := range steps {
		if len(hs) < most {
			a := new(hotlimit.Admission)
			if h, ok := admit(i, a); ok {
				hs = append(hs, held{a, h})
			}
			continue
		}
		j := r.IntN(len(hs))
		h := hs[j]
		hs = slices.Delete(hs, j, j+1)
		done(i, h.h, h.a)
	}
	for _, h := range hs {
		h.a.Refund()
	}
}
