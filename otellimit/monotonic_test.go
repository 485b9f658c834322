package otellimit

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestCountersMonotonicUnderRefunds collects while a global layer
// refuses requests the group layer admitted (so the group's admission is
// given back): inside the global limiter's deny hook, where the refund is
// about to happen, and from concurrent collectors. No monotonic sum may
// go down, and the final values are exact.
func TestCountersMonotonicUnderRefunds(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var mu sync.Mutex // orders collections with their comparisons
	last := map[string]int64{}
	errs := 0
	collect := func(when string) map[string]int64 {
		mu.Lock()
		defer mu.Unlock()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Error(err)
			return nil
		}
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				sum, ok := m.Data.(metricdata.Sum[int64])
				if !ok || !sum.IsMonotonic {
					continue
				}
				for _, p := range sum.DataPoints {
					k := m.Name + "{" + attrString(p.Attributes.ToSlice()) + "}"
					got[k] = p.Value
					if p.Value < last[k] && errs < 5 {
						errs++
						t.Errorf("%s: %s went down from %d to %d", when, k, last[k], p.Value)
					}
					last[k] = max(last[k], p.Value)
				}
			}
		}
		return got
	}
	clock := hotlimit.NewManualClock()
	mk := func(p hotlimit.Policy, opts ...hotlimit.Option) *hotlimit.Limiter {
		l, err := hotlimit.New(p, append(opts, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	group := mk(hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour})
	global := mk(hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
		hotlimit.WithDenyHook(func(uint64, hotlimit.Decision) { collect("in the deny hook") }))
	reg, err := ObserveLimiters(mp, map[string]*hotlimit.Limiter{"group": group, "global": global})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()

	const workers, each = 2, 300
	var wg, collectors sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		collectors.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					collect("concurrent collection")
				}
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			key := string(rune('a' + w))
			for range each {
				hotlimit.AllowLayers(
					hotlimit.Layer{Limiter: group, Key: key, Cost: 1},
					hotlimit.Layer{Limiter: global, Key: "all", Cost: 1},
				)
				collect("after AllowLayers")
			}
		})
	}
	wg.Wait()
	close(stop)
	collectors.Wait()
	got := collect("end")
	// The key of the worker that never won the global layer is fresh
	// after each refund, and removed; the winner's too before it won.
	if n := got["hotlimit.limiter.swept{hotlimit.limit=group}"]; n < each || n >= workers*each {
		t.Errorf("group swept %d, want in [%d, %d)", n, each, workers*each)
	}
	delete(got, "hotlimit.limiter.swept{hotlimit.limit=group}")
	compare(t, got, map[string]int64{
		"hotlimit.limiter.decisions{hotlimit.decision=allowed,hotlimit.limit=group}":  workers * each,
		"hotlimit.limiter.decisions{hotlimit.decision=denied,hotlimit.limit=group}":   0,
		"hotlimit.limiter.refunds{hotlimit.limit=group}":                              workers*each - 1,
		"hotlimit.limiter.decisions{hotlimit.decision=allowed,hotlimit.limit=global}": 1,
		"hotlimit.limiter.decisions{hotlimit.decision=denied,hotlimit.limit=global}":  workers*each - 1,
		"hotlimit.limiter.refunds{hotlimit.limit=global}":                             0,
		"hotlimit.limiter.swept{hotlimit.limit=global}":                               0,
		"hotlimit.limiter.evicted{hotlimit.limit=group}":                              0,
		"hotlimit.limiter.evicted{hotlimit.limit=global}":                             0,
	})
}
