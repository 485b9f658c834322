package promlimit

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// BenchmarkBackendMetrics measures what BackendMetrics adds to one
// backend decision (one admitted layer on an existing key) beside the
// same Local backend unmeasured. The Collector itself adds nothing per
// decision: it reads Stats when scraped.
func BenchmarkBackendMetrics(b *testing.B) {
	limits := map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.Rate{N: 1, Per: time.Nanosecond}, Burst: 1 << 20}}
	for _, name := range []string{"none", "measured"} {
		b.Run(name, func(b *testing.B) {
			f := httplimit.LocalBackend(hotlimit.WithSweepInterval(0))
			if name == "measured" {
				f = NewBackendMetrics(BackendOptions{}).Backend(f)
			}
			be, err := f(limits)
			if err != nil {
				b.Fatal(err)
			}
			defer be.(interface{ Close() error }).Close()
			ls := []httplimit.Layer{{Limit: "l", Key: "rl:v1:tok:0123456789abcdef:route:g", Cost: 1}}
			ctx := context.Background()
			be.AllowStates(ctx, ls, nil)
			b.ReportAllocs()
			for b.Loop() {
				be.AllowStates(ctx, ls, nil)
			}
		})
	}
}
