package hotlimitd_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// fixture is a Server over a parsed configuration and a Local backend on
// a manual clock.
type fixture struct {
	cfg   *config.Config
	clock *hotlimit.ManualClock
	local admission.Backend
	srv   *hotlimitd.Server
}

// newFixture parses yaml and builds a Server on it; opts' Config and
// Backend are set here.
func newFixture(t testing.TB, yaml string, opts hotlimitd.Options) *fixture {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	return newFixtureConfig(t, cfg, opts)
}

// newFixtureConfig is newFixture for a configuration already built.
func newFixtureConfig(t testing.TB, cfg *config.Config, opts hotlimitd.Options) *fixture {
	t.Helper()
	var err error
	f := &fixture{cfg: cfg, clock: hotlimit.NewManualClock()}
	f.local, err = admission.LocalBackend(hotlimit.WithClock(f.clock), hotlimit.WithSweepInterval(0))(cfg.Limits())
	if err != nil {
		t.Fatalf("admission.LocalBackend: %v", err)
	}
	t.Cleanup(func() { f.local.Close() })
	opts.Config = func() *config.Config { return f.cfg }
	if opts.Backend == nil {
		opts.Backend = f.local
	}
	f.srv, err = hotlimitd.New(opts)
	if err != nil {
		t.Fatalf("hotlimitd.New: %v", err)
	}
	return f
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *rlv3.RateLimitDescriptor {
	d := &rlv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits sets d's hits_addend.
func withHits(d *rlv3.RateLimitDescriptor, hits uint64) *rlv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(hits)
	return d
}

func request(domain string, ds ...*rlv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// ask calls ShouldRateLimit and fails the test on an error.
func ask(t testing.TB, s rlsv3.RateLimitServiceServer, req *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := s.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	checkInvariants(t, req, resp)
	return resp
}

// checkInvariants checks what every response must satisfy: one status
// per descriptor, each OK or OVER_LIMIT, the overall code OVER_LIMIT iff
// some status is, and a status without a limit is OK.
func checkInvariants(t testing.TB, req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse) {
	t.Helper()
	if len(resp.Statuses) != len(req.Descriptors) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	over := false
	for i, st := range resp.Statuses {
		switch st.Code {
		case rlsv3.RateLimitResponse_OK:
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			over = true
			if st.CurrentLimit == nil {
				t.Fatalf("status %d is OVER_LIMIT without a limit", i)
			}
		default:
			t.Fatalf("status %d has code %v", i, st.Code)
		}
	}
	want := rlsv3.RateLimitResponse_OK
	if over {
		want = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if resp.OverallCode != want {
		t.Fatalf("overall code %v, want %v (statuses %v)", resp.OverallCode, want, resp.Statuses)
	}
}

// codesOf returns the statuses' codes as "OK OVER_LIMIT ...".
func codesOf(resp *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	for i, st := range resp.Statuses {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(st.Code.String())
	}
	return b.String()
}

// remaining returns the statuses' limit_remaining, -1 for a status
// without a limit.
func remaining(resp *rlsv3.RateLimitResponse) []int64 {
	out := make([]int64, len(resp.Statuses))
	for i, st := range resp.Statuses {
		out[i] = -1
		if st.CurrentLimit != nil {
			out[i] = int64(st.LimitRemaining)
		}
	}
	return out
}

// serve runs s on a gRPC server on 127.0.0.1:0 and returns a client.
func serve(t testing.TB, s *hotlimitd.Server) rlsv3.RateLimitServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	s.Register(g)
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
	return rlsv3.NewRateLimitServiceClient(conn)
}

// failing is a Backend that cannot decide.
type failing struct{}

var errDown = errors.New("store down")

func (failing) AllowStates(context.Context, []admission.Layer, []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	return hotlimit.Decision{}, -1, errDown
}

func (failing) Reset(context.Context, string, string) error { return errDown }

func (failing) Close() error { return nil }

// seconds returns d's duration_until_reset of status i, or -1 when unset.
func seconds(resp *rlsv3.RateLimitResponse, i int) time.Duration {
	d := resp.Statuses[i].DurationUntilReset
	if d == nil {
		return -1
	}
	return d.AsDuration()
}
