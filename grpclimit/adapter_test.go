package grpclimit_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/ratelimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

var _ ratelimit.Limiter = (*grpclimit.Interceptor)(nil)

// Through go-grpc-middleware's own ratelimit interceptors, the budget is
// still exact under concurrency, methods still find their groups (Limit
// reads the method from the context), and a denial is ResourceExhausted
// with the retry-after metadata (the status details are that package's
// to drop, and it does).
func TestGoGRPCMiddlewareAdapter(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"check": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(1), Burst: 25},
			"watch": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(1), Burst: 1},
		},
		Groups: []grpclimit.Group{
			{Name: "check", Methods: []string{mCheck}, Limit: "check"},
			{Name: "watch", Methods: []string{mWatch}, Limit: "watch"},
		},
		DefaultGroup: "check",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serve(t, "tcp4",
		grpc.ChainUnaryInterceptor(ratelimit.UnaryServerInterceptor(ic)),
		grpc.ChainStreamInterceptor(ratelimit.StreamServerInterceptor(ic)))
	ctx, cancel := context.WithCancel(bearer(testCtx(t), "adapter"))
	defer cancel()

	var (
		mu       sync.Mutex
		admitted int
		bad      []string
		wg       sync.WaitGroup
	)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 2 {
				md, err := call(ctx, c)
				mu.Lock()
				switch {
				case err == nil:
					admitted++
				case status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "rate limit exceeded"):
					bad = append(bad, err.Error())
				case one(t, md, grpclimit.MDRetryAfter) != "60" || one(t, md, grpclimit.MDName) != "check":
					bad = append(bad, "metadata "+strings.Join(md.Get(grpclimit.MDRetryAfter), ","))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 25 {
		t.Errorf("admitted %d, want exactly 25", admitted)
	}
	if len(bad) > 0 {
		t.Errorf("%d bad denials, first: %s", len(bad), bad[0])
	}

	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	s, err = c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	md := s.Trailer() // a refusal's metadata is in the trailers
	if status.Code(err) != codes.ResourceExhausted || one(t, md, grpclimit.MDName) != "watch" || one(t, md, grpclimit.MDRetryAfter) != "60" {
		t.Errorf("second stream: %v, trailer %v", err, md)
	}
}
