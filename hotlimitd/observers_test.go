package hotlimitd_test

import (
	"context"
	"testing"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/otellimit"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestOTelObserver: otellimit's observer records the backend's decisions
// of the service, by result and under the binding descriptor's limit.
func TestOTelObserver(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otellimit.New(otellimit.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, testYAML, hotlimitd.Options{Observers: []admission.Observer{obs}})
	for range 3 {
		ask(t, f.srv, request("test", desc("path", "/a")))
	}
	ask(t, f.srv, request("test", desc("path", "/a")))
	limit := limitName(t, f.cfg, "test", "path", "/a")
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok || m.Name != "hotlimit.backend.duration" {
				continue
			}
			for _, p := range h.DataPoints {
				lim, _ := p.Attributes.Value("hotlimit.limit")
				res, _ := p.Attributes.Value("hotlimit.backend.result")
				if lim.AsString() == limit {
					got[res.AsString()] += p.Count
				}
			}
		}
	}
	if got["allowed"] != 2 || got["denied"] != 2 {
		t.Fatalf("hotlimit.backend.duration counts %v, want 2 allowed and 2 denied under %q", got, limit)
	}
}
