package hotlimit_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestWaitTokenBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 2})
		ctx := context.Background()
		for range 2 {
			if err := l.Wait(ctx, "k", 1); err != nil {
				t.Fatal(err)
			}
		}
		// The third waits one interval (100ms) of real time for its slot.
		start := time.Now()
		if err := l.Wait(ctx, "k", 1); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Fatalf("waited %v, want 100ms", got)
		}
	})
}

func TestWaitDeadlineBeforeSlotConsumesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 1})
		l.Allow("k")
		before := l.AllowN("k", 0)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := l.Wait(ctx, "k", 1)
		if !errors.Is(err, hotlimit.ErrDeadline) {
			t.Fatalf("Wait = %v, want ErrDeadline", err)
		}
		if time.Since(start) != 0 {
			t.Fatalf("Wait slept %v before failing", time.Since(start))
		}
		if after := l.AllowN("k", 0); after != before {
			t.Fatalf("state changed: %+v, want %+v", after, before)
		}
	})
}

func TestWaitCancelGivesSlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 1})
		l.Allow("k")
		before := l.AllowN("k", 0)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() { errc <- l.Wait(ctx, "k", 1) }()
		synctest.Wait() // Wait has reserved its slot and sleeps
		if mid := l.AllowN("k", 0); mid.ResetAfter != 2*before.ResetAfter {
			t.Fatalf("reservation not taken: %+v", mid)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want context.Canceled", err)
		}
		if after := l.AllowN("k", 0); after != before {
			t.Fatalf("slot not given back: %+v, want %+v", after, before)
		}
	})
}

func TestWaitLeakyStartsAtItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newManual(t, hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(10), Capacity: 3})
		l.Allow("k")
		l.Allow("k") // delay 100ms
		start := time.Now()
		if err := l.Wait(context.Background(), "k", 1); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 200*time.Millisecond {
			t.Fatalf("waited %v, want 200ms (its turn)", got)
		}
	})
}

func TestWaitWindowRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, c := newManual(t, hotlimit.FixedWindow{Limit: 1, Window: time.Second})
		l.Allow("k")
		done := make(chan error)
		go func() { done <- l.Wait(context.Background(), "k", 1) }()
		synctest.Wait()
		c.Advance(time.Second) // the limiter's clock reaches the next window
		time.Sleep(time.Second)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := l.AllowN("k", 0); d.Remaining != 0 {
			t.Fatalf("Wait did not consume in the new window: %+v", d)
		}
	})
}

func TestWaitErrors(t *testing.T) {
	l, _ := newManual(t, hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 2})
	ctx := context.Background()
	if err := l.Wait(ctx, "k", 3); !errors.Is(err, hotlimit.ErrInvalidCost) {
		t.Errorf("cost above burst: %v", err)
	}
	if err := l.Wait(ctx, "k", -1); !errors.Is(err, hotlimit.ErrInvalidCost) {
		t.Errorf("negative cost: %v", err)
	}
	if err := l.Wait(ctx, "k", 0); err != nil {
		t.Errorf("cost 0: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.Wait(cctx, "k", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	if l.Len() != 0 {
		t.Errorf("failed Waits created %d keys", l.Len())
	}
}
