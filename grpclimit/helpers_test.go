package grpclimit_test

import (
	"context"
	"github.com/hotlimit/hotlimit/admission"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// server, a connection, a stream or a timer of the interceptor.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The methods of the standard health service, the service the tests run.
const (
	mCheck = "/grpc.health.v1.Health/Check"
	mWatch = "/grpc.health.v1.Health/Watch"
	mList  = "/grpc.health.v1.Health/List"
)

// serve runs a real gRPC server with the health service on a loopback
// TCP listener (network "tcp4" or "tcp6"), with the given interceptors,
// and returns a health client connected to it over TCP. Both are stopped
// when the test ends.
func serve(t testing.TB, network string, opts ...grpc.ServerOption) healthpb.HealthClient {
	t.Helper()
	return serveDial(t, network, nil, opts...)
}

// serveDial is serve with the client's dial options (a service config).
func serveDial(t testing.TB, network string, dial []grpc.DialOption, opts ...grpc.ServerOption) healthpb.HealthClient {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "tcp6" {
		addr = "[::1]:0"
	}
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer(opts...)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		hs.Shutdown()
		srv.Stop()
		<-done
	})
	return healthpb.NewHealthClient(conn)
}

// grpcOpts installs ic's unary and stream interceptors.
func grpcOpts(ic *grpclimit.Interceptor) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(ic.Unary()), grpc.ChainStreamInterceptor(ic.Stream())}
}

// serveIC serves over IPv4 loopback with ic's interceptors.
func serveIC(t testing.TB, ic *grpclimit.Interceptor) healthpb.HealthClient {
	return serve(t, "tcp4", grpcOpts(ic)...)
}

// newIC builds an Interceptor, unless cfg names a backend on a Local
// one driven by clock (nil: the default clock), and closes it when the
// test ends.
func newIC(t testing.TB, clock hotlimit.Clock, cfg grpclimit.Config) *grpclimit.Interceptor {
	t.Helper()
	if cfg.Backend == nil && clock != nil {
		cfg.Backend = admission.LocalBackend(hotlimit.WithClock(clock))
	}
	ic, err := grpclimit.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { ic.Close() })
	return ic
}

// limiter returns the limiter of a named limit in ic's Local backend.
func limiter(t testing.TB, ic *grpclimit.Interceptor, name string) *hotlimit.Limiter {
	t.Helper()
	l := ic.Backend().(*admission.Local).Classes().Class(name)
	if l == nil {
		t.Fatalf("no limit %q", name)
	}
	return l
}

// remaining peeks at key's Remaining under a limit (cost 0 consumes
// nothing).
func remaining(t testing.TB, ic *grpclimit.Interceptor, limit, key string) int64 {
	return limiter(t, ic, limit).AllowN(key, 0).Remaining
}

// bearer returns ctx with an authorization entry of token.
func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// call runs one Check and returns its error and rate-limit metadata: the
// response header of an admitted call, the trailer of a refused one
// (which must then have no header: a trailers-only response, the only
// kind gRPC clients retry).
func call(ctx context.Context, c healthpb.HealthClient) (metadata.MD, error) {
	var hdr, trl metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		if len(hdr) > 0 {
			return metadata.Pairs("test-error", "a refused call sent a header"), err
		}
		return trl, err
	}
	return hdr, err
}

// details unpacks a status's ErrorInfo, RetryInfo and QuotaFailure.
type details struct {
	code  codes.Code
	info  *errdetails.ErrorInfo
	retry *errdetails.RetryInfo
	quota *errdetails.QuotaFailure
}

func detailsOf(t testing.TB, err error) details {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a status: %v", err)
	}
	d := details{code: st.Code()}
	for _, x := range st.Details() {
		switch v := x.(type) {
		case *errdetails.ErrorInfo:
			d.info = v
		case *errdetails.RetryInfo:
			d.retry = v
		case *errdetails.QuotaFailure:
			d.quota = v
		case error:
			t.Fatalf("undecodable detail: %v", v)
		}
	}
	return d
}

// reason is the ErrorInfo reason, "" when there is none.
func (d details) reason() string {
	if d.info == nil {
		return ""
	}
	return d.info.Reason
}

// retryDelay is the RetryInfo delay, -1 when there is none.
func (d details) retryDelay() time.Duration {
	if d.retry == nil {
		return -1
	}
	return d.retry.RetryDelay.AsDuration()
}

// one returns md's single value of key, "" when absent; it fails the test
// on several values.
func one(t testing.TB, md metadata.MD, key string) string {
	t.Helper()
	vs := md.Get(key)
	switch len(vs) {
	case 0:
		return ""
	case 1:
		return vs[0]
	}
	t.Fatalf("%s: %d values %q", key, len(vs), vs)
	return ""
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
