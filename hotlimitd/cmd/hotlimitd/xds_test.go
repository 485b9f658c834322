package main

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd/xds"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestXDS: with -xds the command takes its configuration from
// go-control-plane's xDS server, in process: before the first snapshot it
// has none (health NOT_SERVING, /healthcheck 503, descriptors OK without
// a limit); a snapshot is applied (SERVING); a bad one is refused,
// counted, and the running configuration and its limits' state are kept;
// a later one that keeps a limit keeps its state. It fails with the
// snapshot applied without the backend's reload (the new domain
// unlimited), or with the state lost (the fourth request admitted).
func TestXDS(t *testing.T) {
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cp := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(cp, serverv3.NewServer(context.Background(), cache, nil))
	go cp.Serve(lis)
	defer cp.Stop()
	set := func(v string, rcs ...*rlsconfv3.RateLimitConfig) {
		t.Helper()
		res := make([]types.Resource, len(rcs))
		for i, rc := range rcs {
			res[i] = rc
		}
		snap, err := cachev3.NewSnapshot(v, map[string][]types.Resource{xds.TypeURL: res})
		if err != nil {
			t.Fatal(err)
		}
		if err := cache.SetSnapshot(context.Background(), "rls", snap); err != nil {
			t.Fatal(err)
		}
	}
	perHour := func(domain string, n uint32) *rlsconfv3.RateLimitConfig {
		return &rlsconfv3.RateLimitConfig{Name: domain, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
			Key: "user", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: n},
		}}}
	}

	loaded := make(chan error, 16)
	r := startCmd(t, &hooks{loaded: func(err error) { loaded <- err }}, "-xds", lis.Addr().String(), "-xds-node-id", "rls")
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: rlsv3.RateLimitService_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status
	}
	if s := health(); s != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health before a snapshot: %v, want NOT_SERVING", s)
	}
	if code, _ := r.get(t, "/healthcheck"); code != 503 {
		t.Fatalf("/healthcheck before a snapshot: %d, want 503", code)
	}
	if resp := r.ask(t, "x", "user", "ann"); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
		t.Fatalf("before a snapshot: %v, want OK without a limit", resp)
	}

	set("v1", perHour("x", 3))
	if err := nextLoad(t, loaded); err != nil {
		t.Fatalf("v1: %v", err)
	}
	if s := health(); s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health after v1: %v, want SERVING", s)
	}
	if code, _ := r.get(t, "/healthcheck"); code != 200 {
		t.Fatalf("/healthcheck after v1: %d, want 200", code)
	}
	for i := range 2 {
		if resp := r.ask(t, "x", "user", "ann"); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != uint32(2-i) {
			t.Fatalf("v1, request %d: %v, want OK with %d left", i, resp, 2-i)
		}
	}

	bad := perHour("y", 5)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	set("v2", perHour("x", 3), bad)
	if err := nextLoad(t, loaded); err == nil || !strings.Contains(err.Error(), "xds:y") {
		t.Fatalf("the bad v2: %v, want it refused naming xds:y", err)
	}
	if got := r.metric(t, `hotlimitd_config_reloads_total{result="failure"}`); !strings.HasSuffix(got, " 1") {
		t.Fatalf("%s, want 1 failure", got)
	}
	if resp := r.ask(t, "x", "user", "ann"); resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("after the bad v2: %v, want OK with 0 left (v1 kept, with its state)", resp)
	}

	set("v3", perHour("x", 3), perHour("z", 1))
	if err := nextLoad(t, loaded); err != nil {
		t.Fatalf("v3: %v", err)
	}
	if resp := r.ask(t, "x", "user", "ann"); resp.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after v3, which keeps x's limit: %v, want OVER_LIMIT (its state kept)", resp)
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if resp := r.ask(t, "z", "user", "ann"); resp.OverallCode != want {
			t.Fatalf("v3's new domain z, request %d: %v, want %v", i, resp, want)
		}
	}
}

// TestXDSFlags: -xds does not go with -config, nor -xds-tls-ca without
// -xds.
func TestXDSFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-xds", "127.0.0.1:1", "-config", "x.yaml"}, "exclude each other"},
		{[]string{"-xds-tls-ca", "ca.crt"}, "needs -xds"},
		{[]string{"-xds", "127.0.0.1:1", "-xds-tls-ca", "missing.crt"}, "-xds-tls-ca"},
	} {
		args := append([]string{"-grpc", "127.0.0.1:0", "-http", "127.0.0.1:0"}, tc.args...)
		if err := run(context.Background(), args, io.Discard, io.Discard, nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// nextLoad returns the next configuration load's result, or fails the test
// if none comes within a minute: a load that never happens (the hook or the
// apply broken) fails here, not at go test's timeout. The minute is far
// above any load's time, also under -race on a loaded machine: it is a
// bound on a hang, not a measurement.
func nextLoad(t *testing.T, loaded <-chan error) error {
	t.Helper()
	select {
	case err := <-loaded:
		return err
	case <-time.After(time.Minute):
		t.Fatal("no configuration load within a minute")
		return nil
	}
}
