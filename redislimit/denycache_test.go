package redislimit

import (
	"testing"
	"time"
)

func TestDenyCacheBounded(t *testing.T) {
	c := newDenyCache(64)
	var ft fakeTime
	c.now = ft.now
	for i := range 10_000 {
		c.put(string(rune('a'+i%26))+string(rune(i)), denial{until: time.Hour, cost: 1})
	}
	if n := c.len(); n > 64 {
		t.Fatalf("cache holds %d entries, bound 64", n)
	}
	c.put("k", denial{until: 10 * time.Second, resetAt: 20 * time.Second, cost: 2, rem: 1})
	if _, ok := c.get("k", 1, 0); ok {
		t.Fatal("a denial of cost 2 answered a request of cost 1")
	}
	if d, ok := c.get("k", 3, 5*time.Second); !ok || d.until != 10*time.Second {
		t.Fatalf("get cost 3 = %+v, %v; want the cached denial", d, ok)
	}
	if _, ok := c.get("k", 2, 10*time.Second); ok {
		t.Fatal("an expired denial answered")
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
