package redislimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestFleetFixedWindow: three instances, eight goroutines each, with time
// frozen inside one window, and a fourth instance killed (dropped without
// Close) while it holds a lease. The fleet admits at most the limit; what
// it did not admit sits in the live instances' leases (each at most
// MaxLease) or in the killed one's; and after Close gives the leases back,
// the window's count in Redis is exactly what was admitted plus what the
// killed instance held.
func TestFleetFixedWindow(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	const limit, maxLease = 1000, 40
	policy := hotlimit.FixedWindow{Limit: limit, Window: time.Second}
	clk := hotlimit.NewManualClock()
	clk.Advance(300 * time.Millisecond)
	ctx := context.Background()

	killed := instance(t, addr, name, policy, clk, WithLeases(maxLease, 0))
	if ok, err := admit(killed, ctx, key, 1); !ok || err != nil {
		t.Fatalf("killed instance's first request: %v, %v", ok, err)
	}
	killed.leases.bg.Wait()
	killedHeld := killed.held(key)
	if killedHeld < 1 || killedHeld > maxLease {
		t.Fatalf("killed instance holds %d, want 1..%d", killedHeld, maxLease)
	}
	killed = nil // crashed: never closed, its lease is lost

	var ls []*Limiter
	for range 3 {
		ls = append(ls, instance(t, addr, name, policy, clk, WithLeases(maxLease, 0)))
	}
	var admitted atomic.Int64
	admitted.Add(1) // the killed instance's request
	var wg sync.WaitGroup
	for _, l := range ls {
		for range 8 {
			wg.Go(func() {
				for range 200 {
					ok, err := admit(l, ctx, key, 1)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	var heldSum int64
	for _, l := range ls {
		l.leases.bg.Wait()
		h := l.held(key)
		if h > maxLease {
			t.Errorf("an instance holds %d unspent units, above MaxLease %d", h, maxLease)
		}
		heldSum += h
	}
	n := admitted.Load()
	t.Logf("admitted %d, held %d by live instances, %d by the killed one", n, heldSum, killedHeld)
	if n > limit-killedHeld {
		t.Fatalf("admitted %d, above the limit %d less the killed lease %d", n, limit, killedHeld)
	}
	if n+heldSum+killedHeld != limit {
		t.Fatalf("admitted %d + held %d + killed %d = %d, want the whole limit %d (4801 requests were made)",
			n, heldSum, killedHeld, n+heldSum+killedHeld, limit)
	}
	c := redistest.Client(t, addr)
	for _, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if q := windowCount(t, c, ls[0], key, epoch/1_000_000); q != n+killedHeld {
		t.Fatalf("after Close the window counts %d, want admitted %d + killed lease %d", q, n, killedHeld)
	}
}

// TestRedisDown: while Redis cannot be reached, eight goroutines per
// instance spend exactly what its lease held, without error; beyond it the
// failure policy answers with an error wrapping ErrUnavailable (fail
// closed denies, fail open admits). After Redis is back the leases refill,
// and what was admitted without error (the units Redis debited) stays
// within the limit, short of it by at most the leases' bound.
func TestRedisDown(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	const limit, maxLease = 200, 20
	policy := hotlimit.FixedWindow{Limit: limit, Window: time.Second}
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	px := newProxy(t, addr)
	// A breaker that never opens: the test counts the failure policy's
	// answers to calls that reached the cut, not the circuit's.
	noTrip := WithBreaker(NewBreaker(1_000_000, 0))
	closed := instance(t, px.addr(), name, policy, clk, WithLeases(maxLease, 0), WithTimeout(500*time.Millisecond), noTrip)
	open := instance(t, px.addr(), name, policy, clk, WithLeases(maxLease, 0), WithTimeout(500*time.Millisecond), WithFailOpen(), noTrip)
	var admitted int64
	for _, l := range []*Limiter{closed, open} {
		for range 2 { // a lease of 1, then of MaxLease
			if ok, err := admit(l, ctx, key, 1); !ok || err != nil {
				t.Fatalf("first requests: %v, %v", ok, err)
			}
			admitted++
			l.leases.bg.Wait()
		}
	}
	px.cut()
	for i, l := range []*Limiter{closed, open} {
		h := l.held(key)
		if h != maxLease {
			t.Fatalf("instance %d holds %d before the cut, want %d", i, h, maxLease)
		}
		var leased, policyAnswers atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 10 {
					ok, err := admit(l, ctx, key, 1)
					switch {
					case ok && err == nil:
						leased.Add(1)
					case errors.Is(err, ErrUnavailable) && ok == (l.fail.mode == failOpen):
						policyAnswers.Add(1)
					default:
						t.Errorf("instance %d with Redis down: %v, %v; want a lease's admission or the failure policy's answer (%v) with ErrUnavailable", i, ok, err, (l.fail.mode == failOpen))
					}
				}
			})
		}
		wg.Wait()
		l.leases.bg.Wait()
		if leased.Load() != h || policyAnswers.Load() != 80-h {
			t.Fatalf("instance %d with Redis down: %d admitted from its lease of %d, %d answered by the failure policy", i, leased.Load(), h, policyAnswers.Load())
		}
		admitted += h
	}
	px.restore()
	for range 3 * limit {
		for _, l := range []*Limiter{closed, open} {
			ok, err := admit(l, ctx, key, 1)
			if err != nil {
				// The pool may still hold a cut connection once.
				continue
			}
			if ok {
				admitted++
			}
		}
	}
	if admitted > limit {
		t.Fatalf("admitted %d from Redis's debits, above the limit %d", admitted, limit)
	}
	if admitted < limit-2*maxLease {
		t.Fatalf("admitted %d, below limit − 2·MaxLease = %d: more than the leases' bound went unused", admitted, limit-2*maxLease)
	}
}

// TestTokenBucketEnvelope: several instances spend a token bucket in random
// steps while the clock moves, with Sweep, Close and kills among them. Over every interval [a, b] of the run, the
// fleet admits at most Burst + ⌊(b−a)/T⌋ + U(a), where U(a) is what the
// leases held unspent at a (the bound the package doc states), and from
// the start at most Burst + ⌊b/T⌋.
func TestTokenBucketEnvelope(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	const burst, perSec, maxLease = 50, 1000, 10 // T = 1ms
	policy := hotlimit.TokenBucket{Rate: hotlimit.Rate{N: perSec, Per: time.Second}, Burst: burst}
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	var ls []*Limiter
	for range 3 {
		ls = append(ls, instance(t, addr, name, policy, clk, WithLeases(maxLease, 0)))
	}
	var steps []step
	rng := rand.New(rand.NewPCG(7, 9))
	for range 1500 {
		var held int64
		for _, l := range ls {
			held += l.held(key)
		}
		if rng.IntN(4) == 0 {
			clk.Advance(time.Duration(rng.IntN(3000)) * time.Microsecond)
		}
		j := rng.IntN(len(ls))
		l := ls[j]
		s := step{at: int64(clk.Now() / time.Microsecond), heldBefore: held}
		switch op := rng.IntN(100); {
		case op < 3:
			if err := l.SweepLeases(ctx); err != nil {
				t.Fatal(err)
			}
		case op < 5:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			ls[j] = instance(t, addr, name, policy, clk, WithLeases(maxLease, 0))
		case op < 6:
			ls[j] = instance(t, addr, name, policy, clk, WithLeases(maxLease, 0)) // killed
		default:
			cost := int64(1 + rng.IntN(3))
			ok, err := admit(l, ctx, key, cost)
			if err != nil {
				t.Fatal(err)
			}
			l.leases.bg.Wait()
			if ok {
				s.admitted = cost
			}
		}
		steps = append(steps, s)
	}
	checkEnvelope(t, steps, burst, 1000)
}

// step is one decision of a run: its instant (µs), the units it admitted,
// and the units the fleet's leases held before it.
type step struct{ at, admitted, heldBefore int64 }

func checkEnvelope(t *testing.T, steps []step, burst, T int64) {
	t.Helper()
	var total int64
	for i := range steps {
		var sum int64
		for j := i; j < len(steps); j++ {
			sum += steps[j].admitted
			if lim := burst + (steps[j].at-steps[i].at)/T + steps[i].heldBefore; sum > lim {
				t.Fatalf("steps %d..%d (%dµs..%dµs) admitted %d, above Burst + ⌊L/T⌋ + held %d", i, j, steps[i].at, steps[j].at, sum, lim)
			}
		}
		total += steps[i].admitted
		if lim := burst + steps[i].at/T; total > lim {
			t.Fatalf("by %dµs admitted %d, above Burst + ⌊t/T⌋ = %d", steps[i].at, total, lim)
		}
	}
	if total < int64(len(steps))/4 {
		t.Fatalf("admitted only %d over the run: the test exercised nothing", total)
	}
}
