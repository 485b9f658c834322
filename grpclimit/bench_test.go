package grpclimit_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// benchConfig limits by bearer token in a method group with a global
// layer on top, at limits no benchmark reaches, on the default clock.
func benchConfig() grpclimit.Config {
	return grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"check":  hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour},
			"global": hotlimit.FixedWindow{Limit: 1 << 40, Window: time.Hour},
		},
		Groups:       []grpclimit.Group{{Name: "check", Methods: []string{mCheck}, Limit: "check"}},
		DefaultGroup: "check",
		Global:       "global",
		Key:          grpclimit.MetadataKey("authorization"),
	}
}

// BenchmarkUnaryLoopback times one health Check over a real loopback TCP
// connection, one call at a time, bare and behind the interceptor (group
// and global layers, metadata on) and behind go-grpc-middleware's
// ratelimit interceptor with the adapter. The differences between the
// sub-benchmarks of one run are what the interceptor adds per call; the
// absolute figures are mostly the loopback round trip.
func BenchmarkUnaryLoopback(b *testing.B) {
	run := func(b *testing.B, opts ...grpc.ServerOption) {
		c := serve(b, "tcp4", opts...)
		ctx := bearer(context.Background(), "bench-token-0123456789abcdef")
		req := &healthpb.HealthCheckRequest{}
		if _, err := c.Check(ctx, req); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Check(ctx, req); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("bare", func(b *testing.B) { run(b) })
	b.Run("grpclimit", func(b *testing.B) {
		ic := newIC(b, nil, benchConfig())
		run(b, grpcOpts(ic)...)
	})
	b.Run("go-grpc-middleware", func(b *testing.B) {
		ic := newIC(b, nil, benchConfig())
		run(b, grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(ic)))
	})
}

// BenchmarkUnaryLoopbackInterleaved measures the same difference as
// BenchmarkUnaryLoopback, robustly on a loaded machine: each iteration
// makes one call to a bare server and one to a limited one, alternating
// which goes first, and times each, so that load drifts hit both alike.
// It reports medians, which a few calls stalled by the scheduler do not
// move: of the bare calls (bare-ns/call), of the limited calls
// (limited-ns/call), and of the paired differences (added-ns/call).
// "control" limits nothing on either side: its added-ns/call is the
// method's own error.
func BenchmarkUnaryLoopbackInterleaved(b *testing.B) {
	for _, name := range []string{"control", "grpclimit", "no-metadata", "go-grpc-middleware"} {
		b.Run(name, func(b *testing.B) {
			cfg := benchConfig()
			cfg.NoMetadata = name == "no-metadata"
			ic := newIC(b, nil, cfg)
			var opts []grpc.ServerOption
			switch name {
			case "grpclimit", "no-metadata":
				opts = grpcOpts(ic)
			case "go-grpc-middleware":
				opts = []grpc.ServerOption{grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(ic))}
			}
			bare, limited := serve(b, "tcp4"), serve(b, "tcp4", opts...)
			ctx := bearer(context.Background(), "bench-token-0123456789abcdef")
			req := &healthpb.HealthCheckRequest{}
			timed := func(c healthpb.HealthClient) int64 {
				t0 := time.Now()
				if _, err := c.Check(ctx, req); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0).Nanoseconds()
			}
			timed(bare)
			timed(limited)
			var tb, tl, diff []int64
			for b.Loop() {
				var x, y int64
				if len(tb)%2 == 0 {
					x = timed(bare)
					y = timed(limited)
				} else {
					y = timed(limited)
					x = timed(bare)
				}
				tb, tl, diff = append(tb, x), append(tl, y), append(diff, y-x)
			}
			b.ReportMetric(median(tb), "bare-ns/call")
			b.ReportMetric(median(tl), "limited-ns/call")
			b.ReportMetric(median(diff), "added-ns/call")
		})
	}
}

func median(xs []int64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return float64(xs[len(xs)/2])
}

// headerStream is a grpc.ServerTransportStream that keeps nothing.
type headerStream struct{}

func (headerStream) Method() string                  { return mCheck }
func (headerStream) SetHeader(metadata.MD) error     { return nil }
func (headerStream) SendHeader(metadata.MD) error    { return nil }
func (headerStream) SetTrailer(md metadata.MD) error { return nil }

// BenchmarkUnaryInterceptor times the interceptor alone, called directly
// with a handler that does nothing, beside that handler alone: the key (a
// SHA-256 of the token, or the peer address: PeerKey's, or a nil Key's),
// two layers, and the metadata, handed to a transport stream that drops
// it.
func BenchmarkUnaryInterceptor(b *testing.B) {
	addr := net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:4242"))
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: addr})
	ctx = grpc.NewContextWithServerTransportStream(ctx, headerStream{})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer bench-token-0123456789abcdef"))
	info := &grpc.UnaryServerInfo{FullMethod: mCheck}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := handler(ctx, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, name := range []string{"token", "peer", "peer-nil-key"} {
		b.Run(name, func(b *testing.B) {
			cfg := benchConfig()
			switch name {
			case "peer":
				cfg.Key = grpclimit.PeerKey(nil)
			case "peer-nil-key":
				cfg.Key = nil // the peer address, taken by the pipeline itself
			}
			u := newIC(b, nil, cfg).Unary()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := u(ctx, nil, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
