package redislimit

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

func TestKeyLayout(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true})
	defer c.Close()
	p := hotlimit.FixedWindow{Limit: 1, Window: time.Second}
	a := must(New(c, "login", p))
	if got, want := a.RedisKey("u1"), "hotlimit:login:{u1}"; got != want {
		t.Errorf("default key %q, want %q", got, want)
	}
	b := must(New(c, "login", p, WithPrefix("app:"), WithHashTag("tenant7")))
	if got, want := b.RedisKey("u1"), "app:{tenant7}login:{u1}"; got != want {
		t.Errorf("tagged key %q, want %q", got, want)
	}
}

// TestKeysDoNotCollide: two limiters on one prefix never share a Redis
// key, whatever keys callers pass (keys are often attacker-chosen: a user
// name, a header). In a layout such as prefix{tag}name:key, limiter
// "login" with key "ip:1.2.3.4" would write the state of limiter
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
