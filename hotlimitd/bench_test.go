package hotlimitd_test

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

const benchYAML = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
  - key: path
    value: /a
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
  - key: tenant
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`

// BenchmarkShouldRateLimit measures the service in process, without
// gRPC: matching, keys, the one backend decision (a Local on a frozen
// manual clock, keys already held) and the response.
func BenchmarkShouldRateLimit(b *testing.B) {
	one := request("bench", desc("user", "ann"))
	three := request("bench", desc("user", "ann"), desc("path", "/a"), desc("tenant", "acme"))
	// Traced: a sampled span per request, handed to a batch processor
	// that exports to nowhere, and a traceparent in the metadata.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(context.Background())
	for _, bc := range []struct {
		name    string
		req     *rlsv3.RateLimitRequest
		headers bool
		tracer  trace.Tracer
	}{{"descriptors=1", one, false, nil}, {"descriptors=3", three, false, nil}, {"descriptors=3/headers", three, true, nil}, {"descriptors=3/traced", three, false, tp.Tracer("bench")}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, benchYAML, hotlimitd.Options{Headers: bc.headers, Tracer: bc.tracer})
			ctx := context.Background()
			if bc.tracer != nil {
				ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
			}
			ask(b, f.srv, bc.req)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := f.srv.ShouldRateLimit(ctx, bc.req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// discard is a span exporter that drops every span.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// TestAllocs: an admitted request of up to 4 descriptors allocates
// twice: its keys (one string) and its response (one block); with
// headers, twice more.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	f := newFixture(t, benchYAML, hotlimitd.Options{})
	req := request("bench", desc("user", "ann"), desc("path", "/a"), desc("tenant", "acme"), desc("nope", "x"))
	ask(t, f.srv, req)
	ctx := context.Background()
	got := testing.AllocsPerRun(200, func() {
		if _, err := f.srv.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if got > 2 {
		t.Fatalf("%v allocations per request, want at most 2", got)
	}
	// With headers: two more, the fields' text and their HeaderValues.
	h := newFixture(t, benchYAML, hotlimitd.Options{Headers: true})
	ask(t, h.srv, req)
	got = testing.AllocsPerRun(200, func() {
		if _, err := h.srv.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	})
	if got > 4 {
		t.Fatalf("with headers: %v allocations per request, want at most 4", got)
	}
}

// BenchmarkShouldRateLimitGRPC is BenchmarkShouldRateLimit through gRPC
// on loopback (client and server in this process): what the transport
// adds to the service's own cost.
func BenchmarkShouldRateLimitGRPC(b *testing.B) {
	for _, bc := range []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{{"descriptors=1", request("bench", desc("user", "ann"))}, {"descriptors=3", request("bench", desc("user", "ann"), desc("path", "/a"), desc("tenant", "acme"))}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, benchYAML, hotlimitd.Options{})
			client := serve(b, f.srv)
			ctx := context.Background()
			if _, err := client.ShouldRateLimit(ctx, bc.req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.ShouldRateLimit(ctx, bc.req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
