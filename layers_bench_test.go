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
	states := make([]hotlimit.LayerState, len(layers))
	run("AllowLayersState=3", func() { hotlimit.AllowLayersState(states, layers...) })
	// Three layers admit and a drained fourth refuses: three give-backs
	// (refund.go) and the checks of the refused Decision. Each layer holds
	// 1,000 units that outlast the run, so no give-back leaves its key
	// fresh (which would remove the entry and insert it again each time).
	slow := []hotlimit.Layer{
		{Limiter: mk(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1 << 30}), Key: key, Cost: 1},
		{Limiter: mk(hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour}), Key: "ip:203.0.113.9", Cost: 1},
		{Limiter: mk(hotlimit.SlidingWindow{Limit: 1<<21 - 1, Window: time.Hour}), Key: "global", Cost: 1},
	}
	for _, ly := range slow {
		ly.Limiter.AllowN(ly.Key, 1000)
	}
	gate := mk(hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1})
	gate.Allow("gate")
	refused := append(slow, hotlimit.Layer{Limiter: gate, Key: "gate", Cost: 1})
	run("AllowLayers=3+refused", func() { hotlimit.AllowLayers(refused...) })
	var adm hotlimit.Admission
	run("AdmitN", func() { token.AdmitN(&adm, key, 1) })
	run("AdmitN+Refund", func() {
		slow[0].Limiter.AdmitN(&adm, key, 1)
		adm.Refund()
	})
	// Two admissions given back first first: the first lands below the
	// second and renews the entry (shard.go, "Renewals"), the second is
	// then given back from the renewals' floor.
	var adm2 hotlimit.Admission
	run("AdmitN×2+Refund below", func() {
		slow[0].Limiter.AdmitN(&adm, key, 1)
		slow[0].Limiter.AdmitN(&adm2, key, 1)
		adm.Refund()
		adm2.Refund()
	})
	run("Allow/hook=set", func() { hooked.Allow(key) })
	run("Concurrency/acquire+release", func() {
		p, _ := conc.TryAcquire(key)
		p.Release()
	})
	run("SlidingLog", func() { slog.Allow(key) })
}
