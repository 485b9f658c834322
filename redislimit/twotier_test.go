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

// TestLocalDenialNever: a request that can never be admitted (cost above
// the limit) must report RetryAfter = Never, also when the key has a
// cached denial of a smaller cost: a finite RetryAfter points earlier than
// the true wait.
func TestLocalDenialNever(t *testing.T) {
	c := newClient(t, serverAddr(t))
	ctx := context.Background()
	l := must(New(c, "ln", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 2},
		WithPrefix(testPrefix(t)), WithLocalDenials(100)))
	must(l.AllowN(ctx, "k", 2))
	if d := must(l.Allow(ctx, "k")); d.Allowed {
		t.Fatal("empty bucket admitted")
	}
	if d := must(l.AllowN(ctx, "k", 3)); d.RetryAfter != hotlimit.Never {
		t.Fatalf("cost 3 > Burst 2 with a cached denial: %+v; want RetryAfter Never", d)
	}
}
