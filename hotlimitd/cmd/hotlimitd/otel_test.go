package main

import (
	"context"
	"encoding/hex"
	"net"
	"strings"
	"sync"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// collector is an OTLP metrics receiver that keeps what it is sent.
type collector struct {
	colmetricpb.UnimplementedMetricsServiceServer
	mu   sync.Mutex
	reqs []*colmetricpb.ExportMetricsServiceRequest
}

func (c *collector) Export(_ context.Context, req *colmetricpb.ExportMetricsServiceRequest) (*colmetricpb.ExportMetricsServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reqs = append(c.reqs, req)
	return &colmetricpb.ExportMetricsServiceResponse{}, nil
}

// histogramCounts returns, by metric name, the total count of every
// histogram data point received.
func (c *collector) histogramCounts() map[string]uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]uint64{}
	for _, req := range c.reqs {
		for _, rm := range req.ResourceMetrics {
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					for _, p := range m.GetHistogram().GetDataPoints() {
						out[m.Name] += p.Count
					}
				}
			}
		}
	}
	return out
}

// TestOTelExport: with OTEL_EXPORTER_OTLP_ENDPOINT set, the command
// exports otellimit's metrics over OTLP/gRPC, and flushes them at
// shutdown (the export interval is an hour here: only the flush sends).
func TestOTelExport(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{}
	g := grpc.NewServer()
	colmetricpb.RegisterMetricsServiceServer(g, col)
	go g.Serve(lis)
	defer g.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
	r := startCmd(t, nil)
	r.ask(t, "hotlimitd", "generic_key", "a")
	r.ask(t, "hotlimitd", "generic_key", "b")
	r.stop(t)
	if got := col.histogramCounts()["hotlimit.backend.duration"]; got != 2 {
		t.Fatalf("hotlimit.backend.duration counted %d decisions, want 2 (received %v)", got, col.histogramCounts())
	}
	if !strings.Contains(r.logs.String(), "OTLP") {
		t.Fatalf("the start is not logged:\n%s", r.logs)
	}
}

// TestOTelProtocol: an OTLP protocol other than gRPC is refused at
// start, by name.
func TestOTelProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	err := run(context.Background(), []string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, nil, &syncBuffer{}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
		t.Fatalf("error %v", err)
	}
}

// TestOTelBadEndpoint: an endpoint variable the exporter cannot use
// (which it would replace by localhost:4317, silently) is refused at
// start, by name.
func TestOTelBadEndpoint(t *testing.T) {
	for _, tc := range []struct{ v, val string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "::::bad"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317"}, // not a URL: a scheme is needed
		{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://"},
		{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "https://collector:port"},
	} {
		t.Run(tc.val, func(t *testing.T) {
			t.Setenv(tc.v, tc.val)
			// Cancelled: a command that accepted the variable stops at
			// once (with no error) instead of serving.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := run(ctx, []string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, nil, &syncBuffer{}, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.v+"=") {
				t.Fatalf("%s=%s: error %v, want one naming the variable", tc.v, tc.val, err)
			}
		})
	}
}

// TestOTelCollectorDown: with the collector down (a port that refuses),
// SIGTERM still shuts down with success; the lost flush is logged as a
// warning. The export timeout only keeps the test short: the flush fails
// whenever it gives up.
func TestOTelCollectorDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close() // connections to it are refused
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+dead)
	t.Setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "100")
	r := startCmd(t, nil, "-log-format", "json")
	r.ask(t, "hotlimitd", "generic_key", "a")
	r.stop(t) // fails the test if run returns an error
	logs := r.logs.String()
	if !strings.Contains(logs, `"level":"WARN","msg":"OpenTelemetry: the last metrics were not flushed"`) {
		t.Fatalf("the lost flush is not logged as a warning:\n%s", logs)
	}
	allJSON(t, logs)
}

// spanCollector is an OTLP trace receiver that keeps the spans it is
// sent.
type spanCollector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *spanCollector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestOTelTraces: with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set (and no
// metrics endpoint), the command exports a span per ShouldRateLimit,
// child of the caller's traceparent, flushed at shutdown.
func TestOTelTraces(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &spanCollector{}
	g := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(g, col)
	go g.Serve(lis)
	defer g.Stop()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+lis.Addr().String())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000") // only the flush sends
	r := startCmd(t, nil)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	req := &rlsv3.RateLimitRequest{Domain: "hotlimitd", Descriptors: []*rlv3.RateLimitDescriptor{{Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: "generic_key", Value: "a"}}}}}
	if _, err := r.rls.ShouldRateLimit(ctx, req); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(col.spans))
	}
	s := col.spans[0]
	if hex.EncodeToString(s.TraceId) != "0af7651916cd43dd8448eb211c80319c" || hex.EncodeToString(s.ParentSpanId) != "b7ad6b7169203331" {
		t.Errorf("span %q: trace %x, parent %x, want the caller's", s.Name, s.TraceId, s.ParentSpanId)
	}
	attrs := map[string]string{}
	for _, a := range s.Attributes {
		attrs[a.Key] = a.Value.String()
	}
	if !strings.Contains(attrs["hotlimitd.overall_code"], "OK") || !strings.Contains(attrs["hotlimitd.domain"], "hotlimitd") {
		t.Errorf("attributes %v", attrs)
	}
	if !strings.Contains(r.logs.String(), "exporting OpenTelemetry traces") || strings.Contains(r.logs.String(), "exporting OpenTelemetry metrics") {
		t.Errorf("the log does not say traces alone are exported:\n%s", r.logs)
	}
}
