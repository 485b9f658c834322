package hotlimitd_test

import (
	"context"
	"testing"

	"github.com/hotlimit/hotlimit/hotlimitd"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// TestTrace: with a Tracer, each ShouldRateLimit is one server span,
// child of the trace context in the request's gRPC metadata (W3C
// traceparent), with the domain, the number of descriptors and the
// overall code; a refused RPC's span has the error and its gRPC code.
func TestTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	f := newFixture(t, testYAML, hotlimitd.Options{Tracer: tp.Tracer("hotlimitd")})

	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", parent))
	req := request("test", desc("user", "ann"), desc("path", "/a"))
	for range 3 {
		if _, err := f.srv.ShouldRateLimit(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.srv.ShouldRateLimit(context.Background(), request("", desc("user", "ann"))); err == nil {
		t.Fatal("no domain: no error")
	}
	spans := rec.Ended()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4", len(spans))
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			m[a.Key] = a.Value
		}
		return m
	}
	for i, want := range []string{"OK", "OK", "OVER_LIMIT"} {
		s := spans[i]
		a := attrs(s)
		if s.Name() != "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" || s.SpanKind() != trace.SpanKindServer {
			t.Errorf("span %d: %q, kind %v", i, s.Name(), s.SpanKind())
		}
		if got := s.Parent(); got.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || got.SpanID().String() != "b7ad6b7169203331" || !got.IsRemote() {
			t.Errorf("span %d: parent %v, want the request's traceparent", i, got)
		}
		if a["hotlimitd.domain"].AsString() != "test" || a["hotlimitd.descriptors"].AsInt64() != 2 || a["hotlimitd.overall_code"].AsString() != want {
			t.Errorf("span %d: attributes %v, want overall code %s", i, a, want)
		}
		if s.Status().Code != otelcodes.Unset {
			t.Errorf("span %d: status %v", i, s.Status())
		}
	}
	bad := spans[3]
	if a := attrs(bad); bad.Status().Code != otelcodes.Error || a["rpc.grpc.status_code"].AsInt64() != 3 || bad.Parent().IsValid() {
		t.Errorf("invalid request's span: status %v, attributes %v, parent %v", bad.Status(), a, bad.Parent())
	}
}
