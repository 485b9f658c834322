package hotlimit_test

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// BenchmarkLayersAndFriends measures the pieces of layered limiting against
// one plain Allow, in one run so their ratios can be compared: three layers,
// a concurrency acquire+release pair, the deny hook when set (it should add
// nothing on the allow path), and the sliding log. Every request is
// admitted.
func BenchmarkLayersAndFriends(b *testing.B) {
	mk := func(p hotlimit.Policy, opts ...hotlimit.Option) *hotlimit.Limiter { return newLimiter(b, p, opts...) }
	big := hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1_000_000_000, Per: time.Second}, Burst: 1_000_000_000}
	token := mk(big)
	ip := mk(hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour})
	global := mk(hotlimit.SlidingWindow{Limit: 1<<21 - 1, Window: 100 * time.Millisecond})
	hooked := mk(big, hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) {}))
	slog := mk(hotlimit.SlidingLog{Limit: 1000, Window: time.Microsecond})
	conc, err := hotlimit.NewConcurrency(1 << 20)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conc.Close() })

	const key = "tok:8f14e45f"
	layers := []hotlimit.Layer{
		{Limiter: token, Key: key, Cost: 1},
		{Limiter: ip, Key: "ip:203.0.113.9", Cost: 1},
		{Limiter: global, Key: "global", Cost: 1},
	}
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			f()
			for b.Loop() {
				f()
			}
		})
	}
	run("Allow", func() { token.Allow(key) })
	run("AllowLayers=1", func() { hotlimit.AllowLayers(layers[0]) })
	run("AllowLayers=3", func() { hotlimit.AllowLayers(layers...) })
	run("Allow/hook=set", func() { hooked.Allow(key) })
	run("Concurrency/acquire+release", func() {
		p, _ := conc.TryAcquire(key)
		p.Release()
	})
	run("SlidingLog", func() { slog.Allow(key) })
}
