package grpclimit_test

import (
	"context"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// A health service limited per API token: two checks, then one every 10
// seconds. A ManualClock makes the output deterministic; a service leaves
// the Backend (and so the clock) out.
func Example() {
	clock := hotlimit.NewManualClock()
	ic, err := grpclimit.New(grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"health": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(6), Burst: 2},
		},
		Groups: []grpclimit.Group{
			{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "health"},
		},
		DefaultGroup: "health",
		Key:          grpclimit.MetadataKey("authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ic.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ic.Unary()), grpc.ChainStreamInterceptor(ic.Stream()))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	go srv.Serve(lis)
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer my-api-token")

	for range 3 {
		// An admitted call's metadata is in the header, a refused one's
		// in the trailer.
		var hdr, trl metadata.MD
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		md := hdr
		if err != nil {
			md = trl
		}
		fmt.Println(status.Code(err), "remaining", md.Get("ratelimit-remaining"), "retry-after", md.Get("retry-after"))
		for _, d := range status.Convert(err).Details() {
			if ri, ok := d.(*errdetails.RetryInfo); ok {
				fmt.Println("RetryInfo:", ri.RetryDelay.AsDuration())
			}
		}
	}
	// Output:
	// OK remaining [1] retry-after []
	// OK remaining [0] retry-after []
	// ResourceExhausted remaining [0] retry-after [10]
	// RetryInfo: 10s
}

// A server that already chains go-grpc-middleware's interceptors uses the
// Interceptor as its ratelimit.Limiter. Denials then carry that package's
// status message without details; the response metadata still says when
// to retry.
func ExampleInterceptor_Limit() {
	ic, err := grpclimit.New(grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"all": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(100), Burst: 200}},
		Groups:       []grpclimit.Group{{Name: "all", Limit: "all"}},
		DefaultGroup: "all",
		Key:          grpclimit.PeerKey(nil), // the connection's peer address
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ic.Close()
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(ic)),
		grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(ic)),
	)
	defer srv.Stop()
	// Register services and call srv.Serve(lis).
}
