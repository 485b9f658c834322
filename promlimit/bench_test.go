package promlimit

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// BenchmarkBackendMetrics measures what BackendMetrics adds to one
// decision of a pipeline (one admitted layer on an existing key) beside
// the same pipeline unobserved. The Collector itself adds nothing per
// decision: it reads Stats when scraped.
func BenchmarkBackendMetrics(b *testing.B) {
	for _, name := range []string{"none", "measured"} {
		b.Run(name, func(b *testing.B) {
			cfg := admission.Config[string]{
				Limits:  map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Nanosecond}, Burst: 1 << 20}},
				Groups:  []admission.Group[string]{{Name: "g", Limit: "l"}},
				Key:     func(dst []byte, id string) ([]byte, error) { return ident.AppendKindID(dst, "usr", id), nil },
				Backend: admission.LocalBackend(hotlimit.WithSweepInterval(0)),
			}
			if name == "measured" {
				cfg.Observers = []admission.Observer{NewBackendMetrics(BackendOptions{})}
			}
			p, err := admission.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			p.Release(p.Decide(ctx, "client", 0, 1))
			b.ReportAllocs()
			for b.Loop() {
				p.Release(p.Decide(ctx, "client", 0, 1))
			}
		})
	}
}
