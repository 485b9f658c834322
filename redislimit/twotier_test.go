package redislimit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestTwoTier: once Redis denies a key, requests on it are answered in
// process until the denial's RetryAfter, with no round trip, and the
// answer counts RetryAfter down; a smaller cost than the one denied, or
// another key, still goes to Redis.
func TestTwoTier(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var sent redistest.Counter
	c.AddHook(&sent)
	ctx := context.Background()
	var ft fakeTime
	ft.t = time.Hour
	l := must(New(c, "tt", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 10 * time.Second}, Burst: 3},
		WithPrefix(redistest.Prefix(t)), WithLocalDenials(1000)))
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
	before := sent.N()
	for i := range 100 {
		ft.t += 10 * time.Millisecond
		d := must(l.AllowN(ctx, "abuser", 2))
		want := den.RetryAfter - time.Duration(i+1)*10*time.Millisecond
		if d.Allowed || d.RetryAfter != want || d.Limit != 3 {
			t.Fatalf("local answer %d: %+v; want denied with RetryAfter %v", i, d, want)
		}
	}
	if got := sent.N() - before; got != 0 {
		t.Fatalf("100 cached denials sent %d commands", got)
	}
	// A smaller cost may be admitted sooner: it goes to Redis.
	if must(l.Allow(ctx, "abuser")); sent.N()-before != 1 {
		t.Fatal("cost 1 was answered from a cost-2 denial")
	}
	if d := must(l.Allow(ctx, "other")); !d.Allowed || sent.N()-before != 2 {
		t.Fatalf("another key: %+v", d)
	}
	// After RetryAfter, the key goes to Redis again.
	ft.t += den.RetryAfter
	before = sent.N()
	l.AllowN(ctx, "abuser", 2)
	if sent.N()-before != 1 {
		t.Fatal("a denial past its RetryAfter was answered locally")
	}
}

// TestLocalDenialNever: a request that can never be admitted (cost above
// the limit) must report RetryAfter = Never, also when the key has a
// cached denial of a smaller cost: a finite RetryAfter points earlier than
// the true wait.
func TestLocalDenialNever(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	l := must(New(c, "ln", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 2},
		WithPrefix(redistest.Prefix(t)), WithLocalDenials(100)))
	must(l.AllowN(ctx, "k", 2))
	if d := must(l.Allow(ctx, "k")); d.Allowed {
		t.Fatal("empty bucket admitted")
	}
	if d := must(l.AllowN(ctx, "k", 3)); d.RetryAfter != hotlimit.Never {
		t.Fatalf("cost 3 > Burst 2 with a cached denial: %+v; want RetryAfter Never", d)
	}
}

// slowHook is a go-redis hook that advances a fake clock by d while each
// command is in flight: a round trip of d, as the clock sees it.
type slowHook struct {
	ft *fakeTime
	d  time.Duration
}

func (h slowHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.ft.t += h.d / 2
		err := next(ctx, cmd)
		h.ft.t += h.d / 2
		return err
	}
}
func (h slowHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestTwoTierExpiresFromSend: a cached denial's RetryAfter counts from
// when the call was sent, not from when the reply came: Redis decided at
// or after the send, so the cache never denies past the moment Redis
// would admit (it may stop early by up to a round trip; Redis then
// decides). Here each round trip takes 200ms on the cache's clock.
func TestTwoTierExpiresFromSend(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var ft fakeTime
	ft.t = time.Hour
	c.AddHook(slowHook{&ft, 200 * time.Millisecond})
	var sent redistest.Counter
	c.AddHook(&sent)
	ctx := context.Background()
	l := must(New(c, "fs", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1},
		WithPrefix(redistest.Prefix(t)), WithLocalDenials(10), WithTimeout(5*time.Second)))
	l.cache.now = ft.now
	must(l.Allow(ctx, "k"))
	start := ft.t
	den := must(l.Allow(ctx, "k"))
	if den.Allowed || den.RetryAfter <= 0 {
		t.Fatalf("empty bucket: %+v", den)
	}
	// Just before send + RetryAfter the cache answers; at it, Redis does.
	ft.t = start + den.RetryAfter - time.Nanosecond
	before := sent.N()
	if d := must(l.Allow(ctx, "k")); d.Allowed || d.RetryAfter != time.Nanosecond || sent.N() != before {
		t.Fatalf("1ns before the denial's end: %+v, %d commands; want a local denial with RetryAfter 1ns", d, sent.N()-before)
	}
	ft.t = start + den.RetryAfter
	must(l.Allow(ctx, "k"))
	if sent.N() != before+1 {
		t.Fatal("at send + RetryAfter the cache still denied")
	}
}

// TestTwoTierLayers: a layered call is answered from the cache only when
// it is the same call (layers, keys and costs) that Redis denied, and then
// with what AllowLayers reported (the binding layer's RetryAfter, the
// largest ResetAfter, the binding index), counted down. A single layer's
// cached denial does not answer a layered call in which another layer
// binds with a longer wait, nor one that can never be admitted.
func TestTwoTierLayers(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var sent redistest.Counter
	c.AddHook(&sent)
	ctx := context.Background()
	var ft fakeTime
	ft.t = time.Hour
	prefix := redistest.Prefix(t)
	fast := must(New(c, "fast", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1},
		WithPrefix(prefix), WithLocalDenials(100)))
	fast.cache.now = ft.now
	slow := must(New(c, "slow", hotlimit.FixedWindow{Limit: 2, Window: time.Minute}, WithPrefix(prefix)))
	// The scripts run at one instant, 123ms into a minute: slow's window
	// has more than a second left (on the server's clock, a run near the
	// end of a minute saw slow's wait under fast's and failed).
	now := int64(baseMicros)
	fast.testNow = func() int64 { return now }
	slow.testNow = fast.testNow
	must(slow.AllowN(ctx, "k", 2)) // slow is empty for the rest of the minute
	must(fast.Allow(ctx, "k"))
	if d := must(fast.Allow(ctx, "k")); d.Allowed || d.RetryAfter > time.Second {
		t.Fatalf("fast alone: %+v; want a denial of at most 1s", d)
	}
	// fast's denial is cached; the layered call must still report slow's
	// wait, as Redis does.
	d, idx, err := AllowLayersState(ctx, nil, Layer{fast, "k", 1}, Layer{slow, "k", 1})
	if err != nil || d.Allowed || d.RetryAfter <= time.Second || idx != 1 || d.Limit != 2 {
		t.Fatalf("layers with a cached single-layer denial: %+v, binding %d, %v; want slow's wait (> 1s), binding 1", d, idx, err)
	}
	// A cost above a layer's limit can never be admitted.
	if d := must(AllowLayers(ctx, Layer{fast, "k", 1}, Layer{slow, "k", 3})); d.RetryAfter != hotlimit.Never {
		t.Fatalf("cost 3 over a limit of 2: %+v; want RetryAfter Never", d)
	}
	// The layered denial itself is cached (fast denied first), for this
	// same call only, with its own binding layer and waits.
	before := sent.N()
	ft.t += 100 * time.Millisecond
	d2, idx2, err := AllowLayersState(ctx, nil, Layer{fast, "k", 1}, Layer{slow, "k", 1})
	if err != nil || sent.N() != before || idx2 != 1 || d2.RetryAfter != d.RetryAfter-100*time.Millisecond ||
		d2.ResetAfter != d.ResetAfter-100*time.Millisecond || d2.Remaining != d.Remaining || d2.Limit != d.Limit {
		t.Fatalf("the same layered call 100ms later: %+v, binding %d, %v, %d commands; want %+v counted down, locally", d2, idx2, err, sent.N()-before, d)
	}
	if must(AllowLayers(ctx, Layer{fast, "k", 1}, Layer{slow, "other", 1})); sent.N() != before+1 {
		t.Fatal("a layered call with another key was answered from the cache")
	}
}

// TestForgetDenials: after Redis loses its data, ForgetDenials lets the
// next request go to Redis instead of the cached denial.
func TestForgetDenials(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	var sent redistest.Counter
	c.AddHook(&sent)
	ctx := context.Background()
	l := must(New(c, "fd", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1},
		WithPrefix(redistest.Prefix(t)), WithLocalDenials(10)))
	must(l.Allow(ctx, "k"))
	must(l.Allow(ctx, "k")) // denied, cached
	if err := c.Del(ctx, l.RedisKey("k")).Err(); err != nil {
		t.Fatal(err)
	}
	before := sent.N()
	if d := must(l.Allow(ctx, "k")); d.Allowed || sent.N() != before {
		t.Fatalf("the cached denial did not answer: %+v", d)
	}
	l.ForgetDenials()
	if d := must(l.Allow(ctx, "k")); !d.Allowed || sent.N() != before+1 {
		t.Fatalf("after ForgetDenials on a fresh key: %+v; want Redis's admission", d)
	}
}

// TestTwoTierNoAlloc: a request answered from the cache allocates
// nothing, alone or layered.
func TestTwoTierNoAlloc(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	a := must(New(c, "na", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}, WithPrefix(prefix), WithLocalDenials(10)))
	b := must(New(c, "nb", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 5}, WithPrefix(prefix)))
	must(a.Allow(ctx, "k"))
	must(a.Allow(ctx, "k"))
	must(AllowLayers(ctx, Layer{a, "k", 1}, Layer{b, "k", 1}))
	var d hotlimit.Decision
	if n := testing.AllocsPerRun(100, func() { d, _ = a.Allow(ctx, "k") }); n != 0 || d.Allowed {
		t.Fatalf("a cached denial: %v allocations, %+v", n, d)
	}
	if n := testing.AllocsPerRun(100, func() { d, _ = AllowLayers(ctx, Layer{a, "k", 1}, Layer{b, "k", 1}) }); n != 0 || d.Allowed {
		t.Fatalf("a cached layered denial: %v allocations, %+v", n, d)
	}
}

// TestTwoTierForgottenAfterOutage: a call that finds the server
// unreachable empties the caches of its layers, so that a server that
// comes back empty (a restart without persistence) is asked again rather
// than denied from what it no longer holds.
func TestTwoTierForgottenAfterOutage(t *testing.T) {
	srv := redistest.StartServer(t, 0)
	c := redistest.Client(t, srv.Addr())
	ctx := context.Background()
	l := must(New(c, "fo", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1},
		WithLocalDenials(10), WithBreaker(NewBreaker(100, time.Hour))))
	must(l.Allow(ctx, "k"))
	if d := must(l.Allow(ctx, "k")); d.Allowed || l.cache.len() != 1 {
		t.Fatalf("the denial was not cached: %+v", d)
	}
	srv.Stop()
	if _, err := l.Allow(ctx, "other"); err == nil {
		t.Fatal("decided with the server down")
	}
	redistest.StartServer(t, srv.Port)
	if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
		t.Fatalf("k after the restart: %+v, %v; want the empty server's admission", d, err)
	}
}

// TestTwoTierLargerCost: a cached denial answers only the same call. A
// larger cost than the one denied needs longer than the cached RetryAfter,
// so Redis must answer it: TokenBucket {1 per 2s, Burst 3} after a cost
// of 3, a cost of 1 waits 2s but a cost of 2 waits 4s. The same holds for
// a layered call whose denying layer's cost grew.
func TestTwoTierLargerCost(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	var ft fakeTime
	ft.t = time.Hour
	now := int64(baseMicros)
	pol := hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 2 * time.Second}, Burst: 3}
	l := must(New(c, "lc", pol, WithPrefix(prefix), WithLocalDenials(100)))
	other := must(New(c, "lo", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 100}, WithPrefix(prefix)))
	for _, x := range []*Limiter{l, other} {
		x.testNow = func() int64 { return now }
	}
	l.cache.now = ft.now
	for _, layered := range []bool{false, true} {
		key := fmt.Sprintf("k%v", layered)
		call := func(cost int64) hotlimit.Decision {
			if layered {
				return must(AllowLayers(ctx, Layer{l, key, cost}, Layer{other, key, 1}))
			}
			return must(l.AllowN(ctx, key, cost))
		}
		if d := call(3); !d.Allowed {
			t.Fatalf("layered %v: cost 3 on a full bucket: %+v", layered, d)
		}
		if d := call(1); d.Allowed || d.RetryAfter != 2*time.Second {
			t.Fatalf("layered %v: cost 1 on an empty bucket: %+v; want denied, RetryAfter 2s", layered, d)
		}
		if d := call(2); d.Allowed || d.RetryAfter != 4*time.Second {
			t.Fatalf("layered %v: cost 2 after a cached denial of cost 1: %+v; want Redis's RetryAfter 4s", layered, d)
		}
		// The same call as the cached one is still answered locally.
		var sent redistest.Counter
		c.AddHook(&sent)
		if d := call(2); d.Allowed || d.RetryAfter != 4*time.Second || sent.N() != 0 {
			t.Fatalf("layered %v: the same call again: %+v, %d commands; want the cached 4s, locally", layered, d, sent.N())
		}
	}
}
