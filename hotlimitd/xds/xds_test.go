package xds_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/hotlimitd/xds"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// perHour is a RateLimitConfig of domain with one key-only rule of key,
// n per hour.
func perHour(name, domain, key string, n uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: key, RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_HOUR, RequestsPerUnit: n},
	}}}
}

// TestParseAsFile: a RateLimitConfig reads as the file that says the
// same: the same domains and limits, with the same names (so a limit
// keeps its state across a move from files to xDS), every field of the
// proto carried over; and a resource the file could not say either is
// refused, naming it.
func TestParseAsFile(t *testing.T) {
	rc := &rlsconfv3.RateLimitConfig{Name: "mail", Domain: "messaging", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "message_type", Value: "marketing", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
			Key: "to_number", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_DAY, RequestsPerUnit: 5, Name: "marketing"},
		}}},
		{Key: "to_number", RateLimit: &rlsconfv3.RateLimitPolicy{
			Unit: rlsconfv3.RateLimitUnit_SECOND, RequestsPerUnit: 0, Replaces: []*rlsconfv3.RateLimitReplace{{Name: "marketing"}},
		}, ShadowMode: true, DetailedMetric: true},
		{Key: "vip", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true}},
	}}
	file := `domain: messaging
descriptors:
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 5, name: marketing}
  - key: to_number
    rate_limit: {unit: second, requests_per_unit: 0, replaces: [{name: marketing}]}
    shadow_mode: true
    detailed_metric: true
  - key: vip
    rate_limit: {unlimited: true}
`
	a, err := anypb.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := xds.Parse([]*anypb.Any{a})
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.Parse("messaging.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	strip := func(ls []*config.Limit) []config.Limit {
		var out []config.Limit
		for _, l := range ls {
			c := *l
			c.File, c.Line = "", 0
			out = append(out, c)
		}
		slices.SortFunc(out, func(a, b config.Limit) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	g, w := strip(got.All()), strip(want.All())
	if len(g) != 3 || len(g) != len(w) {
		t.Fatalf("%d limits from xDS, %d from the file; want 3 each", len(g), len(w))
	}
	for i := range g {
		if g[i].Name != w[i].Name || g[i].RuleName != w[i].RuleName || !slices.Equal(g[i].Replaces, w[i].Replaces) ||
			g[i].Unit != w[i].Unit || g[i].RequestsPerUnit != w[i].RequestsPerUnit || g[i].Unlimited != w[i].Unlimited ||
			g[i].Shadow != w[i].Shadow || g[i].DetailedMetric != w[i].DetailedMetric {
			t.Errorf("limit %d from xDS:\n%+v\nfrom the file:\n%+v", i, g[i], w[i])
		}
	}
	if f := got.All()[0].File; f != "xds:mail" {
		t.Errorf("File %q, want xds:mail", f)
	}

	for name, bad := range map[string]*rlsconfv3.RateLimitConfig{
		"no unit":   {Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{RequestsPerUnit: 1}}}},
		"no domain": perHour("r", "", "k", 1),
		"no key":    perHour("r", "d", "", 1),
		"unlimited with a limit": {Name: "r", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{{
			Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unlimited: true, RequestsPerUnit: 3}}}},
	} {
		a, err := anypb.New(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := xds.Parse([]*anypb.Any{a}); err == nil || !strings.Contains(err.Error(), "xds:r") {
			t.Errorf("%s: %v, want an error naming xds:r", name, err)
		}
	}
	two := []*anypb.Any{mustAny(t, perHour("a", "d", "k", 1)), mustAny(t, perHour("b", "d", "k", 2))}
	if _, err := xds.Parse(two); err == nil {
		t.Error("two resources of one domain were taken")
	}
	// With config.MergeDomains they are one domain of two rules, as two
	// files are.
	twoKeys := []*anypb.Any{mustAny(t, perHour("a", "d", "k", 1)), mustAny(t, perHour("b", "d", "j", 2))}
	if c, err := xds.Parse(twoKeys, config.MergeDomains()); err != nil || len(c.All()) != 2 {
		t.Errorf("two resources of one domain, merged: %v, %v; want one domain of 2 limits", c, err)
	}
	wrong := mustAny(t, &corev3.Node{Id: "x"})
	if _, err := xds.Parse([]*anypb.Any{wrong}); err == nil || !strings.Contains(err.Error(), "resource 0") {
		t.Errorf("a resource of another type: %v, want an error naming it", err)
	}
	if c, err := xds.Parse(nil); err != nil || len(c.Domains()) != 0 {
		t.Errorf("no resources: %v, %v; want an empty configuration", c, err)
	}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// controlPlane is go-control-plane's xDS server with a snapshot cache,
// on loopback, that records every request of its streams.
type controlPlane struct {
	t     *testing.T
	cache cachev3.SnapshotCache
	reqs  chan *discoverygrpc.DiscoveryRequest
	addr  string
	srv   *grpc.Server
}

func newControlPlane(t *testing.T) *controlPlane {
	cp := &controlPlane{t: t, cache: cachev3.NewSnapshotCache(true, cachev3.IDHash{}, nil), reqs: make(chan *discoverygrpc.DiscoveryRequest, 4096)}
	cp.serve("127.0.0.1:0")
	t.Cleanup(func() { cp.srv.Stop() })
	return cp
}

// serve starts the gRPC server on addr (after stop, the address it had).
func (cp *controlPlane) serve(addr string) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		cp.t.Fatal(err)
	}
	cp.addr = lis.Addr().String()
	cb := serverv3.CallbackFuncs{StreamRequestFunc: func(_ int64, r *discoverygrpc.DiscoveryRequest) error {
		select {
		case cp.reqs <- r:
		default: // never blocks the server: the tests read far fewer
		}
		return nil
	}}
	cp.srv = grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(cp.srv, serverv3.NewServer(context.Background(), cp.cache, cb))
	go cp.srv.Serve(lis)
}

// set makes the resources the node's snapshot, of version v.
func (cp *controlPlane) set(node, v string, rcs ...*rlsconfv3.RateLimitConfig) {
	cp.t.Helper()
	res := make([]types.Resource, len(rcs))
	for i, rc := range rcs {
		res[i] = rc
	}
	snap, err := cachev3.NewSnapshot(v, map[string][]types.Resource{xds.TypeURL: res})
	if err != nil {
		cp.t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		cp.t.Fatal(err)
	}
}

// next returns the next request the control plane got that answers a
// response (has a nonce), an ACK or a NACK, other than a NACK of the
// message skip (a NACK repeated).
func (cp *controlPlane) next(skip string) *discoverygrpc.DiscoveryRequest {
	for r := range cp.reqs {
		if r.GetResponseNonce() != "" && (r.GetErrorDetail() == nil || r.GetErrorDetail().GetMessage() != skip) {
			return r
		}
	}
	return nil
}

// TestClient: against go-control-plane's server, a Client applies each
// snapshot and ACKs it (the request carries its version, no error); a
// snapshot that does not load, or that Apply refuses, is NACKed with the
// error and the last version ACKed, and nothing is applied; when the
// control plane goes away and comes back, the Client opens a new stream
// and applies what it serves then. It fails with the ACK sent before
// Apply (a refused snapshot ACKed) or without the new stream.
func TestClient(t *testing.T) {
	cp := newControlPlane(t)
	conn, err := grpc.NewClient(cp.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	applied := make(chan *config.Config, 8)
	refuse := errors.New("the backend refuses these limits")
	var refuseNext atomic.Bool
	errs := make(chan error, 64)
	c, err := xds.New(xds.Options{
		Conn: conn, Node: &corev3.Node{Id: "rls"}, MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond,
		Apply: func(cfg *config.Config) error {
			if refuseNext.Load() {
				return refuse
			}
			applied <- cfg
			return nil
		},
		OnRefused: func(err error) { errs <- err },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	cp.set("rls", "v1", perHour("a", "alpha", "user", 5))
	if cfg := <-applied; !slices.Equal(cfg.Domains(), []string{"alpha"}) {
		t.Fatalf("v1 applied %v, want [alpha]", cfg.Domains())
	}
	if r := cp.next(""); r.GetVersionInfo() != "v1" || r.GetErrorDetail() != nil {
		t.Fatalf("after v1: version %q, error %v; want an ACK of v1", r.GetVersionInfo(), r.GetErrorDetail())
	}

	bad := perHour("b", "beta", "user", 5)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	cp.set("rls", "v2", perHour("a", "alpha", "user", 5), bad)
	r := cp.next("")
	if r.GetVersionInfo() != "v1" || !strings.Contains(r.GetErrorDetail().GetMessage(), "xds:b") {
		t.Fatalf("after the bad v2: version %q, error %v; want a NACK naming xds:b, v1 kept", r.GetVersionInfo(), r.GetErrorDetail())
	}
	// The cache sends v2 again at once: NACKed again, after a backoff.
	if again := cp.next(""); again.GetErrorDetail().GetMessage() != r.GetErrorDetail().GetMessage() {
		t.Fatalf("v2 sent again: %v, want the same NACK", again)
	}

	refuseNext.Store(true)
	cp.set("rls", "v3", perHour("a", "alpha", "user", 6))
	if r := cp.next(r.GetErrorDetail().GetMessage()); r.GetVersionInfo() != "v1" || r.GetErrorDetail().GetMessage() != refuse.Error() {
		t.Fatalf("after the refused v3: version %q, error %v; want a NACK with Apply's error", r.GetVersionInfo(), r.GetErrorDetail())
	}
	refuseNext.Store(false) // the NACK was sent: Run waits for the next response

	// The control plane goes away and comes back, serving v4.
	cp.srv.Stop()
	cp.set("rls", "v4", perHour("g", "gamma", "user", 7))
	cp.serve(cp.addr)
	if cfg := <-applied; !slices.Equal(cfg.Domains(), []string{"gamma"}) {
		t.Fatalf("after reconnecting, applied %v, want [gamma]", cfg.Domains())
	}
	if r := cp.next(refuse.Error()); r.GetVersionInfo() != "v4" || r.GetErrorDetail() != nil {
		t.Fatalf("after v4: version %q, error %v; want an ACK of v4", r.GetVersionInfo(), r.GetErrorDetail())
	}
	select {
	case cfg := <-applied:
		t.Fatalf("a refused snapshot was applied: %v", cfg.Domains())
	default:
	}
	var nacks []string
	for len(errs) > 0 {
		nacks = append(nacks, (<-errs).Error())
	}
	if len(nacks) != 2 || !strings.Contains(nacks[0], "xds:b") || !strings.Contains(nacks[1], refuse.Error()) {
		t.Fatalf("OnRefused told %q; want v2's error and v3's, each once however often it came back", nacks)
	}
}

// TestNewRefuses: options that cannot work are refused by name.
func TestNewRefuses(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	apply := func(*config.Config) error { return nil }
	for _, c := range []struct {
		o    xds.Options
		want string
	}{
		{xds.Options{Apply: apply}, "Conn"},
		{xds.Options{Conn: conn}, "Apply"},
		{xds.Options{Conn: conn, Apply: apply, MinBackoff: -1}, "negative"},
		{xds.Options{Conn: conn, Apply: apply, MinBackoff: time.Second, MaxBackoff: time.Millisecond}, "MaxBackoff"},
	} {
		if _, err := xds.New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error naming %s", c.o, err, c.want)
		}
	}
}
