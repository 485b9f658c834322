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
	if d, ok := c.get("k", 5*time.Second); !ok || d.until != 10*time.Second || d.cost != 2 {
		t.Fatalf("get = %+v, %v; want the cached denial", d, ok)
	}
	if _, ok := c.get("k", 10*time.Second); ok {
		t.Fatal("an expired denial answered")
	}
	c.put("k", denial{until: time.Hour})
	c.del("k")
	if _, ok := c.get("k", 0); ok {
		t.Fatal("a deleted denial answered")
	}
}

// TestDenyCacheEveryKey: WithLocalDenials(n) can hold any key, whatever n:
// a bound below the number of stripes must not leave stripes that hold
// nothing (with 16 stripes of which one holds one entry, 15 keys in 16
// would never be cached).
func TestDenyCacheEveryKey(t *testing.T) {
	for _, max := range []int{1, 2, 3, 5, 17} {
		for i := range 200 {
			c := newDenyCache(max)
			key := "key" + string(rune('a'+i%26)) + string(rune(i))
			c.put(key, denial{until: time.Hour})
			if _, ok := c.get(key, 0); !ok {
				t.Fatalf("WithLocalDenials(%d): key %q was not cached in an empty cache", max, key)
			}
		}
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
