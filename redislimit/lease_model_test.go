package redislimit

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestModelFixedWindow runs random interleavings of requests (which spend
// leases, take them and refill them), clock moves within and across
// windows, Sweep, Close and kills over three instances on a real Redis,
// and after every step checks the window's count in Redis against a model:
// count = admitted + held by live instances + lost with killed ones, all
// in the current window; admitted ≤ limit; no instance holds more than
// MaxLease. Refills run in the background; each step waits for them, so
// the state checked is settled while the order of events is the random one.
func TestModelFixedWindow(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	const limit, maxLease, W = 60, 8, 10_000 // W in µs
	policy := hotlimit.FixedWindow{Limit: limit, Window: W * time.Microsecond}
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	c := redistest.Client(t, addr)
	var ls [3]*Limiter
	for i := range ls {
		ls[i] = instance(t, addr, name, policy, clk, WithLeases(maxLease, 0))
	}
	win := func() int64 { return (epoch + int64(clk.Now()/time.Microsecond)) / W }
	k := win()
	var admitted, lost, windows, denied int64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		j := rng.IntN(len(ls))
		l := ls[j]
		switch op := rng.IntN(100); {
		case op < 8:
			clk.Advance(time.Duration(rng.IntN(W/2)) * time.Microsecond)
		case op < 10:
			if err := l.SweepLeases(ctx); err != nil {
				t.Fatal(err)
			}
		case op < 11:
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			ls[j] = instance(t, addr, name, policy, clk, WithLeases(maxLease, 0))
		case op < 12:
			lost += ls[j].held(key)
			ls[j] = instance(t, addr, name, policy, clk, WithLeases(maxLease, 0))
		default:
			cost := int64(1 + rng.IntN(3))
			ok, err := admit(l, ctx, key, cost)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				admitted += cost
			} else {
				denied++
			}
		}
		if w := win(); w != k {
			k, admitted, lost = w, 0, 0
			windows++
		}
		var held int64
		for _, m := range ls {
			m.leases.bg.Wait()
			h := m.held(key)
			if h > maxLease {
				t.Fatalf("step %d: an instance holds %d, above MaxLease %d", i, h, maxLease)
			}
			held += h
		}
		if admitted > limit {
			t.Fatalf("step %d: window %d admitted %d, above the limit %d", i, k, admitted, limit)
		}
		if q := windowCount(t, c, ls[0], key, k); q != admitted+held+lost {
			t.Fatalf("step %d: Redis counts %d in window %d; the model: admitted %d + held %d + lost %d = %d",
				i, q, k, admitted, held, lost, admitted+held+lost)
		}
	}
	if windows < 20 || denied < 100 {
		t.Fatalf("the run crossed %d windows and saw %d denials: it exercised too little", windows, denied)
	}
}

// TestGiveChecksWindow: a give-back for window k that reaches Redis in
// window k+1 changes nothing, even when the stored state is window k+1's.
func TestGiveChecksWindow(t *testing.T) {
	addr := redistest.Addr(t)
	name, key := redistest.Prefix(t), "k"
	const W = 10_000
	policy := hotlimit.FixedWindow{Limit: 100, Window: W * time.Microsecond}
	clk := hotlimit.NewManualClock()
	ctx := context.Background()
	l := instance(t, addr, name, policy, clk, WithLeases(10, 0))
	c := redistest.Client(t, addr)
	r, err := l.leases.take(ctx, key, 5, 5)
	if err != nil || r.granted != 5 {
		t.Fatalf("take in window k: %+v, %v", r, err)
	}
	clk.Advance(W * time.Microsecond)
	r2, err := l.leases.take(ctx, key, 7, 7)
	if err != nil || r2.granted != 7 || r2.stamp != r.stamp+1 {
		t.Fatalf("take in window k+1: %+v, %v", r2, err)
	}
	for _, stamp := range []int64{r.stamp, r2.stamp + 1} {
		v, err := l.leases.call(ctx, key, l.leases.now(), "give", l.argv[0], l.argv[1], l.argv[2], l.argv[3], 5, stamp, r2.inc)
		if err != nil || len(v) != 1 || v[0] != 0 {
			t.Fatalf("give for window %d in window %d: %v, %v; want {0}", stamp, r2.stamp, v, err)
		}
	}
	if q := windowCount(t, c, l, key, r2.stamp); q != 7 {
		t.Fatalf("window k+1 counts %d after the give-backs, want 7", q)
	}
	v, err := l.leases.call(ctx, key, l.leases.now(), "give", l.argv[0], l.argv[1], l.argv[2], l.argv[3], 3, r2.stamp, r2.inc)
	if err != nil || len(v) != 1 || v[0] != 1 {
		t.Fatalf("give within window k+1: %v, %v; want {1}", v, err)
	}
	if q := windowCount(t, c, l, key, r2.stamp); q != 4 {
		t.Fatalf("window k+1 counts %d after giving 3 back, want 4", q)
	}
}
