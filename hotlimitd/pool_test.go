package hotlimitd_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestPooledRequests: Register's handler decodes each request into a
// pooled one, and no request sees another's data. Workers call at once
// over gRPC (with ServerOption and an interceptor), each alternating a
// request of three descriptors of two entries, each a check (hits_addend
// 0) under the nested rule of domain one, with the request's hits_addend
// 5, and a request of one descriptor of one entry in domain two, which
// takes 1. Each answer is exact whatever the schedule: a worker's keys
// are its own. A leaked domain, entry, hits_addend or descriptor changes
// the limit, the count of statuses or what the second request takes.
func TestPooledRequests(t *testing.T) {
	cfg, err := config.ParseFiles([]config.File{
		{Name: "one.yaml", Data: []byte("domain: one\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 1000}\n    descriptors:\n      - key: b\n        rate_limit: {unit: day, requests_per_unit: 2000}\n")},
		{Name: "two.yaml", Data: []byte("domain: two\ndescriptors:\n  - key: a\n    rate_limit: {unit: day, requests_per_unit: 500}\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureConfig(t, cfg, hotlimitd.Options{})
	var intercepted sync.Map // the FullMethods the interceptor saw
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(hotlimitd.ServerOption(), grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if _, ok := req.(*rlsv3.RateLimitRequest); !ok || info.Server != any(f.srv) {
			return nil, fmt.Errorf("interceptor: request %T, server %v", req, info.Server)
		}
		intercepted.Store(info.FullMethod, true)
		return h(ctx, req)
	}))
	f.srv.Register(g)
	done := make(chan error, 1)
	go func() { done <- g.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		g.Stop()
		if err := <-done; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("Serve: %v", err)
		}
	})
	client := rlsv3.NewRateLimitServiceClient(conn)
	const workers, rounds = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			errs <- poolWorker(client, w, rounds)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if _, ok := intercepted.Load(rlsv3.RateLimitService_ShouldRateLimit_FullMethodName); !ok {
		t.Error("the interceptor never saw ShouldRateLimit")
	}
}

// poolWorker is worker w of TestPooledRequests.
func poolWorker(client rlsv3.RateLimitServiceClient, w, rounds int) error {
	ctx := context.Background()
	x := &rlsv3.RateLimitRequest{Domain: "one", HitsAddend: 5}
	for j := range 3 {
		x.Descriptors = append(x.Descriptors, &rlv3.RateLimitDescriptor{
			Entries:    []*rlv3.RateLimitDescriptor_Entry{{Key: "a", Value: fmt.Sprintf("x%d", w)}, {Key: "b", Value: fmt.Sprint(j)}},
			HitsAddend: wrapperspb.UInt64(0),
		})
	}
	y := request("two", desc("a", fmt.Sprintf("y%d", w)))
	for i := range rounds {
		resp, err := client.ShouldRateLimit(ctx, x)
		if err != nil {
			return err
		}
		if len(resp.Statuses) != 3 {
			return fmt.Errorf("worker %d round %d: %d statuses for 3 descriptors", w, i, len(resp.Statuses))
		}
		for j, st := range resp.Statuses {
			if st.CurrentLimit.GetRequestsPerUnit() != 2000 || st.LimitRemaining != 2000 {
				return fmt.Errorf("worker %d round %d: descriptor %d's status %v, want the nested rule's 2000, all left", w, i, j, st)
			}
		}
		resp, err = client.ShouldRateLimit(ctx, y)
		if err != nil {
			return err
		}
		if len(resp.Statuses) != 1 {
			return fmt.Errorf("worker %d round %d: %d statuses for 1 descriptor", w, i, len(resp.Statuses))
		}
		if st := resp.Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 500 || st.LimitRemaining != uint32(500-1-i) {
			return fmt.Errorf("worker %d round %d: status %v, want domain two's 500, %d left", w, i, st, 500-1-i)
		}
	}
	return nil
}
