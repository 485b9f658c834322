package redislimit

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/redis/go-redis/v9"
)

// TestLayerKeys: layerKeys gives each layer the key RedisKey gives it,
// whatever the mix of limiters (prefix, hash tag, a key stored under the
// special form), in one allocation for the keys' bytes beside the slice.
func TestLayerKeys(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, ContextTimeoutEnabled: true}) // never dialled
	t.Cleanup(func() { _ = client.Close() })
	p := hotlimit.FixedWindow{Limit: 1, Window: time.Second}
	mk := func(name string, opts ...Option) *Limiter {
		l, err := New(client, name, p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b, c := mk("a"), mk("bee", WithPrefix("p:")), mk("c", WithHashTag("t"))
	cases := [][]Layer{
		{{Limiter: a, Key: "x"}},
		{{Limiter: a, Key: "x"}, {Limiter: b, Key: "yy"}, {Limiter: c, Key: "zzz"}},
		{{Limiter: a, Key: ""}, {Limiter: b, Key: "}q"}, {Limiter: c, Key: ""}, {Limiter: a, Key: "k"}},
		{{Limiter: b, Key: "same"}, {Limiter: b, Key: "same"}, {Limiter: a, Key: "é{x}"}},
	}
	for _, layers := range cases {
		keys := layerKeys(layers)
		if len(keys) != len(layers) {
			t.Fatalf("%d keys for %d layers", len(keys), len(layers))
		}
		for i, ly := range layers {
			if want := ly.Limiter.RedisKey(ly.Key); keys[i] != want {
				t.Errorf("layer %d (%q): key %q, RedisKey %q", i, ly.Key, keys[i], want)
			}
		}
	}
	three := cases[1]
	if n := testing.AllocsPerRun(100, func() { _ = layerKeys(three) }); n != 2 {
		t.Errorf("layerKeys of 3 layers: %v allocations, want 2 (the slice and the keys' bytes)", n)
	}
}
