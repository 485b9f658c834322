package backend

import (
	"context"
	"errors"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestReset: Reset makes a spent key of a limit fresh (in process, and
// in Redis), leaves the limit's other keys spent, refuses a limit the
// store does not hold with ErrUnknownLimit, and a closed store with
// ErrClosed.
func TestReset(t *testing.T) {
	for _, kind := range []Kind{Local, Redis} {
		t.Run(string(kind), func(t *testing.T) {
			o := Options{Kind: kind}
			if kind != Local {
				o = Options{Kind: kind, RedisAddrs: []string{redisAddr(t)}, Prefix: redistest.Prefix(t), Timeout: slow}
			}
			s := open(t, o, map[string]hotlimit.Policy{"a": frozen(2)})
			k, other := admission.Layer{Limit: "a", Key: "k", Cost: 1}, admission.Layer{Limit: "a", Key: "other", Cost: 1}
			if got := admits(t, s, 3, k) + admits(t, s, 3, other); got != 4 {
				t.Fatalf("%d of 6 admitted; want 2 per key", got)
			}
			ctx := context.Background()
			if err := s.Reset(ctx, "a", "k"); err != nil {
				t.Fatal(err)
			}
			if got := admits(t, s, 3, k); got != 2 {
				t.Fatalf("after Reset: %d of 3 admitted; want 2 (a fresh key)", got)
			}
			if got := admits(t, s, 1, other); got != 0 {
				t.Fatalf("another key after Reset: %d admitted; want 0 (still spent)", got)
			}
			if err := s.Reset(ctx, "nope", "k"); !errors.Is(err, admission.ErrUnknownLimit) {
				t.Fatalf("Reset of an unknown limit: %v; want ErrUnknownLimit", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Reset(ctx, "a", "k"); !errors.Is(err, ErrClosed) {
				t.Fatalf("Reset after Close: %v; want ErrClosed", err)
			}
		})
	}
}
