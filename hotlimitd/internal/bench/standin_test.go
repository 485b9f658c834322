package bench_test

import (
	"context"
	"net"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/bench"
	"google.golang.org/grpc"
)

// standIn is a minimal RateLimitService for the harness's own tests: each
// descriptor's first entry names a limit (its key) and a key (its value),
// and every descriptor of a request is decided at once by an
// admission.Local. It is not hotlimitd: the comparison runs the real
// service (see rlsbench).
type standIn struct {
	rlsv3.UnimplementedRateLimitServiceServer
	b admission.Backend
}

func (s *standIn) ShouldRateLimit(ctx context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	layers := make([]admission.Layer, len(r.Descriptors))
	for i, d := range r.Descriptors {
		layers[i] = admission.Layer{Limit: d.Entries[0].Key, Key: d.Entries[0].Value, Cost: 1}
	}
	d, _, err := s.b.AllowStates(ctx, layers, nil)
	if err != nil {
		return nil, err
	}
	code := rlsv3.RateLimitResponse_OK
	if !d.Allowed {
		code = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	resp := &rlsv3.RateLimitResponse{OverallCode: code}
	for range r.Descriptors {
		resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: code})
	}
	return resp, nil
}

// startStandIn serves a standIn with the limits d0, d1, d2 of policy p,
// and x0, x1, x2 of OverLimit per OverPeriod under a, on a loopback port,
// until the test ends.
func startStandIn(t *testing.T, a bench.Algorithm, p hotlimit.Policy) string {
	t.Helper()
	over := bench.Policy(a, bench.OverLimit, bench.OverPeriod)
	b, err := admission.LocalBackend()(map[string]hotlimit.Policy{"d0": p, "d1": p, "d2": p, "x0": over, "x1": over, "x2": over})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(g, &standIn{b: b})
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}
