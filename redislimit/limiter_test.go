package redislimit

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestNewRejects(t *testing.T) {
	ok := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer ok.Close()
	retrying := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer retrying.Close()
	noCtx := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer noCtx.Close()
	tb := hotlimit.TokenBucket{Rate: hotlimit.PerSecond(10), Burst: 5}
	cases := []struct {
		name   string
		client redis.Scripter
		lname  string
		policy hotlimit.Policy
		opts   []Option
		want   string
	}{
		{"window not whole µs", ok, "x", hotlimit.FixedWindow{Limit: 5, Window: 1500 * time.Nanosecond}, nil, "FixedWindow.Window 1.5µs is not a whole number of microseconds"},
		{"sliding not whole µs", ok, "x", hotlimit.SlidingWindow{Limit: 5, Window: time.Second + 1}, nil, "SlidingWindow.Window"},
		{"zero limit", ok, "x", hotlimit.SlidingWindow{Window: time.Second}, nil, "SlidingWindow.Limit must be > 0, got 0"},
		{"huge limit", ok, "x", hotlimit.FixedWindow{Limit: 1 << 51, Window: time.Second}, nil, "FixedWindow.Limit 2251799813685248 exceeds 2^50"},
		{"huge window", ok, "x", hotlimit.FixedWindow{Limit: 1, Window: (1 << 51) * time.Microsecond}, nil, "exceeds 2^50µs"},
		{"burst overflow", ok, "x", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1 << 30}, nil, "TokenBucket.Burst 1073741824 × interval 3600000000µs exceeds 2^50µs"},
		{"zero burst", ok, "x", hotlimit.TokenBucket{Rate: hotlimit.PerHour(1)}, nil, "TokenBucket.Burst must be > 0"},
		{"zero rate", ok, "x", hotlimit.TokenBucket{Burst: 1}, nil, "TokenBucket.Rate.N must be > 0"},
		{"leaky capacity", ok, "x", hotlimit.LeakyBucket{Rate: hotlimit.PerSecond(1), Capacity: -1}, nil, "LeakyBucket.Capacity must be ≥ 0, got -1"},
		{"log limit", ok, "x", hotlimit.SlidingLog{Limit: 2000, Window: time.Second}, nil, "SlidingLog.Limit 2000 exceeds 1024"},
		{"log window", ok, "x", hotlimit.SlidingLog{Limit: 5, Window: time.Second + 1}, nil, "SlidingLog.Window 1.000000001s is not a whole number of microseconds"},
		{"nil policy", ok, "x", nil, nil, "nil policy"},
		{"nil pointer", ok, "x", (*hotlimit.FixedWindow)(nil), nil, "nil *hotlimit.FixedWindow"},
		{"empty name", ok, "", tb, nil, "empty limiter name"},
		{"nil client", nil, "x", tb, nil, "nil client"},
		{"retrying client", retrying, "x", tb, nil, "MaxRetries 3"},
		{"no context deadlines", noCtx, "x", tb, nil, "ContextTimeoutEnabled"},
		{"bad timeout", ok, "x", tb, []Option{WithTimeout(0)}, "WithTimeout: timeout must be > 0"},
		{"nil breaker", ok, "x", tb, []Option{WithBreaker(nil)}, "nil Breaker"},
		{"bad tag", ok, "x", tb, []Option{WithHashTag("a}b")}, "contains a brace"},
		{"bad cache", ok, "x", tb, []Option{WithLocalDenials(-1)}, "maxKeys must be ≥ 0"},
		{"nil option", ok, "x", tb, []Option{nil}, "nil Option"},
		{"brace in prefix", ok, "x", tb, []Option{WithPrefix("app{")}, "WithPrefix: prefix \"app{\" contains a brace"},
		// What hotlimit rejects, so that FallbackLocal and the in-process
		// limiter always accept the same policy.
		{"faster than 1/ns", ok, "x", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 2, Per: time.Nanosecond}, Burst: 1}, nil, "faster than 1 event per nanosecond"},
		{"window of decades", ok, "x", hotlimit.FixedWindow{Limit: 1, Window: 30 * 365 * 24 * time.Hour}, nil, "FixedWindow.Window 262800h0m0s exceeds"},
		{"sliding limit", ok, "x", hotlimit.SlidingWindow{Limit: 1 << 40, Window: time.Hour}, nil, "SlidingWindow.Limit 1099511627776 does not fit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(tc.client, tc.lname, tc.policy, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, %v; want an error containing %q", l, err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "redislimit: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
	// Pointers to policies are accepted, as by hotlimit.New.
	if _, err := New(ok, "x", &tb); err != nil {
		t.Fatal(err)
	}
}

// TestSpecRounding: a token bucket interval that is not a whole
// microsecond is rounded up, towards denying.
func TestSpecRounding(t *testing.T) {
	sp := must(newSpec(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 2}))
	if sp.a != 333_334 || sp.tau != 666_668 {
		t.Fatalf("PerSecond(3): T = %dµs, tau = %dµs; want 333334, 666668", sp.a, sp.tau)
	}
	sp = must(newSpec(hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 3, Per: time.Microsecond}, Burst: 1}))
	if sp.a != 1 {
		t.Fatalf("3/µs: T = %dµs, want 1", sp.a)
	}
}

// TestOneRoundTrip counts the commands each decision sends: one EVALSHA,
// and after SCRIPT FLUSH one EVALSHA answered NOSCRIPT plus one EVAL.
func TestOneRoundTrip(t *testing.T) {
	addr := redistest.Addr(t)
	c := redistest.Client(t, addr)
	var n redistest.Counter
	c.AddHook(&n)
	ctx := context.Background()
	l := must(New(c, "rt", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 24 * time.Hour}, Burst: 50}, WithPrefix(redistest.Prefix(t))))
	if _, err := l.Allow(ctx, "k"); err != nil { // loads the script if needed
		t.Fatal(err)
	}
	before := n.N()
	for range 10 {
		if d, err := l.Allow(ctx, "k"); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	if got := n.N() - before; got != 10 {
		t.Fatalf("10 decisions sent %d commands, want 10", got)
	}
	if err := redistest.Client(t, addr).ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before = n.N()
	d, err := l.Allow(ctx, "k")
	if err != nil || !d.Allowed || d.Remaining != 50-12 {
		t.Fatalf("after SCRIPT FLUSH: %+v, %v; want allowed with Remaining %d", d, err, 50-12)
	}
	if got := n.N() - before; got != 2 {
		t.Fatalf("a decision after SCRIPT FLUSH sent %d commands, want 2 (EVALSHA, EVAL)", got)
	}
}

// TestTTL: each write's TTL is the time until the key is fresh again,
// rounded up to a millisecond; denials and peeks write nothing.
func TestTTL(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	prefix := redistest.Prefix(t)
	tb := must(New(c, "tb", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 10 * time.Second}, Burst: 3}, WithPrefix(prefix)))
	sw := must(New(c, "sw", hotlimit.SlidingWindow{Limit: 2, Window: 10 * time.Second}, WithPrefix(prefix)))

	if _, err := tb.AllowN(ctx, "k", 0); err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(ctx, tb.RedisKey("k")).Val(); n != 0 {
		t.Fatal("a peek on an unknown key created it")
	}
	for _, l := range []*Limiter{tb, sw} {
		d := must(l.AllowN(ctx, "k", 2))
		ttl := c.PTTL(ctx, l.RedisKey("k")).Val()
		want := (d.ResetAfter + time.Millisecond - 1).Truncate(time.Millisecond)
		// The PTTL is read a moment after the write.
		if ttl > want || ttl < want-500*time.Millisecond {
			t.Errorf("%s: PTTL %v after a decision with ResetAfter %v; want about %v", l.name, ttl, d.ResetAfter, want)
		}
		d = must(l.AllowN(ctx, "k", 2))
		if d.Allowed {
			t.Fatalf("%s: second cost-2 request admitted", l.name)
		}
		val := c.Get(ctx, l.RedisKey("k")).Val()
		d2 := must(l.AllowN(ctx, "k", 2))
		if d2.Allowed || c.Get(ctx, l.RedisKey("k")).Val() != val {
			t.Fatalf("%s: a denial changed the state", l.name)
		}
	}
}

// TestServerTime: decisions follow the server's clock, whatever the
// process's: a token bucket of 1 per 100ms refills after real time.
func TestServerTime(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	l := must(New(c, "st", hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: 100 * time.Millisecond}, Burst: 1}, WithPrefix(redistest.Prefix(t))))
	if d := must(l.Allow(ctx, "k")); !d.Allowed {
		t.Fatal("first request denied")
	}
	d := must(l.Allow(ctx, "k"))
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 100*time.Millisecond {
		t.Fatalf("second request: %+v; want denied with 0 < RetryAfter ≤ 100ms", d)
	}
	// Wait on the server's clock, not a sleep of a guessed length.
	time.Sleep(d.RetryAfter)
	for i := 0; ; i++ {
		if d := must(l.Allow(ctx, "k")); d.Allowed {
			break
		}
		if i > 100 {
			t.Fatal("not admitted after RetryAfter")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLayersEdgeCases(t *testing.T) {
	c := redistest.Client(t, redistest.Addr(t))
	other := redistest.Client(t, redistest.Addr(t))
	ctx := context.Background()
	p := hotlimit.FixedWindow{Limit: 5, Window: time.Hour}
	a := must(New(c, "a", p, WithPrefix(redistest.Prefix(t))))
	b := must(New(other, "b", p, WithPrefix(redistest.Prefix(t))))
	if d, i, err := AllowLayersState(ctx, nil); err != nil || d.Allowed || d.RetryAfter != hotlimit.Never || i != -1 {
		t.Errorf("no layers: %+v, %d, %v; want denied with Never, binding -1 (as hotlimit.AllowLayers)", d, i, err)
	}
	if d, err := AllowLayers(ctx, Layer{Limiter: a, Key: "k", Cost: 1}, Layer{Key: "k", Cost: 1}); err != nil || d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Errorf("nil limiter: %+v, %v; want denied, Never", d, err)
	}
	if _, err := AllowLayers(ctx, Layer{Limiter: a, Key: "k", Cost: 1}, Layer{Limiter: b, Key: "k", Cost: 1}); !errors.Is(err, ErrMixedLayers) {
		t.Errorf("two clients: %v; want ErrMixedLayers", err)
	}
	long := strings.Repeat("x", hotlimit.MaxKeyLen+1)
	if d, err := a.Allow(ctx, long); err != nil || d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Errorf("key too long: %+v, %v; want denied, Never", d, err)
	}
	if d := must(a.Allow(ctx, "k")); !d.Allowed || d.Remaining != 4 {
		t.Errorf("a layer of a refused call consumed: %+v", d)
	}
}
