package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestGiveAfterReset: a lease's give-back after its key was Reset gives
// nothing to the key's new state, even when that state looks the same as
// the one the lease was taken from (the same window, or the same TAT at a
// frozen instant): the take 5, Reset, take 5 again, give 5 sequence would
// otherwise let the window or the bucket admit 10 against 5.
func TestGiveAfterReset(t *testing.T) {
	addr := redistest.Addr(t)
	ctx := context.Background()
	for _, policy := range []hotlimit.Policy{
		hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
		hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 5},
	} {
		t.Run(fmt.Sprintf("%T", policy), func(t *testing.T) {
			clk := hotlimit.NewManualClock()
			l := instance(t, addr, redistest.Prefix(t), policy, clk, WithLeases(5, 0))
			r, err := l.leases.take(ctx, "k", 5, 5)
			if err != nil || r.granted != 5 {
				t.Fatalf("take: %+v, %v", r, err)
			}
			if err := l.Reset(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			r2, err := l.leases.take(ctx, "k", 5, 5)
			if err != nil || r2.granted != 5 {
				t.Fatalf("take after Reset: %+v, %v", r2, err)
			}
			v, err := l.give(ctx, "k", 5, r)
			if err != nil || len(v) != 1 || v[0] != 0 {
				t.Fatalf("give of the reset state's lease: %v, %v; want {0}", v, err)
			}
			if r3, err := l.leases.take(ctx, "k", 1, 1); err != nil || r3.granted != 0 {
				t.Fatalf("a take after the give-back: %+v, %v; want none (10 against 5)", r3, err)
			}
		})
	}
}

// give runs the give-back of n units of the take r.
func (l *Limiter) give(ctx context.Context, key string, n int64, r takeReply) ([]int64, error) {
	return l.leases.call(ctx, key, l.leases.now(), "give", l.argv[0], l.argv[1], l.argv[2], l.argv[3], n, r.stamp, r.inc)
}

// TestCloseAfterReset: units a lease took before its key was Reset are
// not given back into the key's new state when the lease closes, even
// after the lease took more from the new state in the same window.
func TestCloseAfterReset(t *testing.T) {
	addr := redistest.Addr(t)
	name := redistest.Prefix(t)
	ctx := context.Background()
	policy := hotlimit.FixedWindow{Limit: 10, Window: time.Hour}
	clk := hotlimit.NewManualClock()
	l := instance(t, addr, name, policy, clk, WithLeases(5, 0))
	other := instance(t, addr, name, policy, clk, WithLeases(5, 0))
	c := redistest.Client(t, addr)
	if ok, err := admit(l, ctx, "k", 1); !ok || err != nil {
		t.Fatalf("first: %v, %v", ok, err)
	}
	l.leases.bg.Wait()
	if err := l.Reset(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	r, err := other.leases.take(ctx, "k", 5, 5)
	if err != nil || r.granted != 5 {
		t.Fatalf("other's take: %+v, %v", r, err)
	}
	if ok, err := admit(l, ctx, "k", 5); !ok || err != nil {
		t.Fatalf("5 after Reset: %v, %v", ok, err)
	}
	l.leases.bg.Wait()
	k := r.stamp
	before := windowCount(t, c, l, "k", k)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	after := windowCount(t, c, l, "k", k)
	t.Logf("window counts %d before Close, %d after; l held %d", before, after, l.held("k"))
	// The new state counts 5 (other) + what l took from it; l may give
	// back only units it took from the new state and did not spend.
	if after < 10 {
		t.Fatalf("the window counts %d after Close: l gave back units of the state Reset removed", after)
	}
}
