package redislimit

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

// TestClusterClientRedirectsRejected: a ClusterClient retries a command
// after a broken connection or a timeout (on the same node, then another)
// up to MaxRedirects times, whatever MaxRetries says; a script that ran
// before the connection broke would then consume twice. New must reject
// such a client, as it rejects MaxRetries.
func TestClusterClientRedirectsRejected(t *testing.T) {
	tb := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 5}
	retrying := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer retrying.Close()
	if _, err := New(retrying, "x", tb); err == nil || !strings.Contains(err.Error(), "MaxRedirects") {
		t.Fatalf("New with a ClusterClient that retries through MaxRedirects: err = %v; want one naming MaxRedirects", err)
	}
	ok := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, MaxRedirects: -1, ContextTimeoutEnabled: true})
	defer ok.Close()
	if _, err := New(ok, "x", tb); err != nil {
		t.Fatalf("New with MaxRedirects: -1: %v", err)
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

// TestDenyCacheBoundSmall: the cache holds at most maxKeys entries, also
// when maxKeys is below the number of stripes.
func TestDenyCacheBoundSmall(t *testing.T) {
	for _, max := range []int{1, 5, 17, 40} {
		c := newDenyCache(max)
		for i := range 1000 {
			c.put(string(rune('a'+i%26))+string(rune(i)), denial{until: time.Hour, cost: 1})
		}
		if n := c.len(); n > max {
			t.Errorf("WithLocalDenials(%d): the cache holds %d entries", max, n)
		}
	}
}

// TestBreakerOneProbe: in half-open state exactly one probe is in flight.
// A call acquired while the breaker was still closed and abandoned later
// (its caller's context ended) must not hand out a second probe.
func TestBreakerOneProbe(t *testing.T) {
	var ft fakeTime
	b := NewBreaker(2, time.Second)
	b.now = ft.now
	old, _ := b.acquire() // acquired while closed, still in flight
	if !old {
		t.Fatal("acquire refused while closed")
	}
	for range 2 {
		if !acq(b) {
			t.Fatal("acquire refused while closed")
		}
		b.done(false)
	}
	ft.t += time.Second
	ok, probe := b.acquire()
	if !ok || !probe {
		t.Fatalf("acquire after the cool-down = %v, %v; want the probe", ok, probe)
	}
	b.release(false) // the old call's caller gave up
	if ok, _ := b.acquire(); ok {
		t.Fatal("a second probe went through while the first was in flight")
	}
}

// TestKeysDoNotCollide: two limiters on one prefix never share a Redis
// key, whatever keys callers pass (keys are often attacker-chosen: a user
// name, a header). With WithHashTag the layout was prefix{tag}name:key, so
// limiter "login" with key "ip:1.2.3.4" wrote the state of limiter
// "login:ip" for key "1.2.3.4": consuming a victim's quota, or, across
// kinds, overwriting a window's state with a TAT that then parses as
// fresh (a bypass).
func TestKeysDoNotCollide(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	tb := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}
	sw := hotlimit.SlidingWindow{Limit: 5, Window: time.Minute}
	for _, opts := range [][]Option{nil, {WithHashTag("t")}} {
		a := must(New(c, "login", tb, opts...))
		b := must(New(c, "login:ip", sw, opts...))
		if ka, kb := a.RedisKey("ip:1.2.3.4"), b.RedisKey("1.2.3.4"); ka == kb {
			t.Errorf("limiters %q and %q share the Redis key %q", a.Name(), b.Name(), ka)
		}
	}
	// A name with a brace could end where a key begins, and moves the
	// hash tag; an empty tag makes Redis Cluster hash the whole key, so
	// layers no longer share a slot.
	if _, err := New(c, "a:{b", tb); err == nil {
		t.Error("New accepted a name with a brace")
	}
	if _, err := New(c, "a", tb, WithHashTag("")); err == nil {
		t.Error("New accepted an empty hash tag")
	}
}

// TestBreakerConcurrent drives one breaker from many goroutines, under
// -race: every acquired call ends in exactly one done or release, refused
// calls touch nothing, and once calls succeed again the breaker closes.
func TestBreakerConcurrent(t *testing.T) {
	b := NewBreaker(3, 0) // no cool-down: every state is visited often
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				ok, probe := b.acquire()
				if !ok {
					continue
				}
				switch (g + i) % 3 {
				case 0:
					b.done(true)
				case 1:
					b.done(false)
				default:
					b.release(probe)
				}
			}
		}()
	}
	wg.Wait()
	for range 10 { // a probe (or a closed breaker) lets a call through
		if ok, _ := b.acquire(); ok {
			b.done(true)
		}
	}
	if b.Open() || b.state.Load() != breakerClosed || b.probing {
		t.Fatalf("breaker not closed after successes: state %d, probing %v", b.state.Load(), b.probing)
	}
}
