package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestTwoTier: once Redis denies a key, requests on it are answered in
// process until the denial's RetryAfter, with no round trip, and the
// answer counts RetryAfter down; a smaller cost than the one denied, or
// another key, still goes to Redis.
func TestTwoTier(t *testing.T) {
	c := newClient(t, serverAddr(t))
	var sent counter
	c.AddHook(&sent)
	ctx := context.Background()
	var ft fakeTime
	ft.t = time.Hour
	l := must(New(c, "tt", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 10 * time.Second}, Burst: 3},
		WithPrefix(testPrefix(t)), WithLocalDenials(1000)))
	l.cache.now = ft.now
	for range 3 {
		if d := must(l.Allow(ctx, "abuser")); !d.Allowed {
			t.Fatal("burst denied")
		}
	}
	den := must(l.AllowN(ctx, "abuser", 2))
	if den.Allowed || den.RetryAfter <= 10*time.Second {
		t.Fatalf("cost 2 on an empty bucket: %+v", den)
	}
	before := sent.n.Load()
	for i := range 100 {
		ft.t += 10 * time.Millisecond
		d := must(l.AllowN(ctx, "abuser", 2))
		want := den.RetryAfter - time.Duration(i+1)*10*time.Millisecond
		if d.Allowed || d.RetryAfter != want || d.Limit != 3 {
			t.Fatalf("local answer %d: %+v; want denied with RetryAfter %v", i, d, want)
		}
	}
	if got := sent.n.Load() - before; got != 0 {
		t.Fatalf("100 cached denials sent %d commands", got)
	}
	// A smaller cost may be admitted sooner: it goes to Redis.
	if must(l.Allow(ctx, "abuser")); sent.n.Load()-before != 1 {
		t.Fatal("cost 1 was answered from a cost-2 denial")
	}
	if d := must(l.Allow(ctx, "other")); !d.Allowed || sent.n.Load()-before != 2 {
		t.Fatalf("another key: %+v", d)
	}
	// After RetryAfter, the key goes to Redis again.
	ft.t += den.RetryAfter
	before = sent.n.Load()
	l.AllowN(ctx, "abuser", 2)
	if sent.n.Load()-before != 1 {
		t.Fatal("a denial past its RetryAfter was answered locally")
	}
}
