package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestWindowsGiveBackAfterLimitChange: a give-back by a limiter of a
// Limit under 2^20 (Admission.Refund, a lease's give) on a count that a
// larger Limit of the same name left (a policy changed under traffic, two
// versions of a deployment) stores that count as the string "k 0 q": a
// count of 2^21 or more packed would carry into the window index, and the
// state would read as the next window, 2^21 units lighter, so the larger
// Limit would admit 2^21 units more in this window than it allows.
func TestWindowsGiveBackAfterLimitChange(t *testing.T) {
	addr := redistest.Addr(t)
	c := redistest.Client(t, addr)
	ctx := context.Background()
	const w = time.Second
	for _, via := range []string{"refund", "lease"} {
		t.Run(via, func(t *testing.T) {
			clk := hotlimit.NewManualClock() // the lease's: epoch + its reading (onClock)
			clk.Set(123_457 * time.Microsecond)
			now := int64(epoch + 123_457)
			k := now / int64(w/time.Microsecond)
			name := redistest.Prefix(t)
			small := hotlimit.FixedWindow{Limit: 1000, Window: w}
			big := must(New(c, name, hotlimit.FixedWindow{Limit: 3_000_000, Window: w}))
			big.testNow = func() int64 { return now }
			var give func() (bool, error)
			switch via {
			case "refund":
				s := must(New(c, name, small))
				s.testNow = big.testNow
				var a Admission
				if d, err := s.AdmitN(ctx, &a, "k", 5); err != nil || !d.Allowed {
					t.Fatalf("AdmitN: %+v %v", d, err)
				}
				give = func() (bool, error) { return a.Refund(ctx) }
			default:
				s := leased(t, c, name, small, clk, WithLeases(5, 0))
				r, err := s.leases.take(ctx, "k", 5, 5)
				if err != nil || r.granted != 5 {
					t.Fatalf("take: %+v %v", r, err)
				}
				give = func() (bool, error) {
					v, err := s.give(ctx, "k", 5, r)
					return err == nil && len(v) == 1 && v[0] == 1, err
				}
			}
			if d, err := big.AllowN(ctx, "k", 2_500_000); err != nil || !d.Allowed {
				t.Fatalf("the larger Limit: %+v %v", d, err)
			}
			if ok, err := give(); !ok || err != nil {
				t.Fatalf("give-back: %v %v", ok, err)
			}
			if got, want := c.Get(ctx, big.RedisKey("k")).Val(), fmt.Sprintf("%d 0 2500000", k); got != want {
				t.Errorf("state %q, want %q", got, want)
			}
			d, err := big.AllowN(ctx, "k", 1)
			rest := time.Duration(int64(w/time.Microsecond)-now%int64(w/time.Microsecond)) * time.Microsecond
			if err != nil || !d.Allowed || d.Remaining != 499_999 || d.ResetAfter != rest {
				t.Fatalf("%+v %v, want Remaining 499999 (3,000,000 − 2,500,001) and ResetAfter %v", d, err, rest)
			}
		})
	}
}
