package main

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/grpc"
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
