package redislimit

import (
	"context"
	"testing"
	"time"
)

// TestSettleAllocs: settling a call that succeeded allocates nothing
// beyond recording it in its circuit (the reply-error check's target is
// allocated only for an error).
func TestSettleAllocs(t *testing.T) {
	c := NewBreaker(5, time.Second).circuit("node")
	ctx := context.Background()
	done := testing.AllocsPerRun(100, func() {
		_, tk := c.acquire(nil)
		c.done(tk, true, nil)
	})
	settled := testing.AllocsPerRun(100, func() {
		_, tk := c.acquire(nil)
		settle(ctx, c, tk, nil, nil)
	})
	if settled != done {
		t.Fatalf("acquire and settle: %v allocations, acquire and done %v", settled, done)
	}
}
