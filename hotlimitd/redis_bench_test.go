package hotlimitd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"github.com/hotlimit/hotlimit/promlimit"
	"github.com/hotlimit/hotlimit/redislimit"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// redisBenchYAML: three fixed windows that no benchmark exhausts.
const redisBenchYAML = `domain: bench
descriptors:
  - key: d0
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: d1
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: d2
    rate_limit: {unit: second, requests_per_unit: 1000000000}
`

// BenchmarkShouldRateLimitRedis is a ShouldRateLimit of 1 or 3
// descriptors as cmd/hotlimitd serves it on -backend redis (its gRPC
// server options, a hotlimitd/backend Store of its Redis defaults,
// promlimit's decision metrics), over a real gRPC loopback connection,
// against the redis-server of HOTLIMIT_REDIS_ADDR. The client sends the
// request's wire bytes and drops the response's, so that the client's own
// work, counted in allocs/op too, stays small and the same on every
// commit. cpu-µs/op is the process's CPU time (client and server, not
// redis-server) per call, which a loaded machine distorts less than
// ns/op. callers=1 is one call at a time (each sent alone to Redis);
// callers=32 batches (redislimit), as rlsbench's load does; deadline
// gives each call a deadline (a minute), as Envoy gives each its
// timeout (grpc-timeout), which the server's context then carries.
func BenchmarkShouldRateLimitRedis(b *testing.B) {
	addr := os.Getenv(redistest.AddrEnv)
	if addr == "" {
		b.Skipf("%s is not set: run hotlimitd/test.sh, or start a redis-server and set it", redistest.AddrEnv)
	}
	cfg, err := config.Parse("bench.yaml", []byte(redisBenchYAML))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		for _, bc := range []struct {
			callers  int
			deadline bool
		}{{1, false}, {32, false}, {32, true}} {
			callers := bc.callers
			name := "descriptors=" + strconv.Itoa(n) + "/callers=" + strconv.Itoa(callers)
			if bc.deadline {
				name += "/deadline"
			}
			b.Run(name, func(b *testing.B) {
				st, err := backend.Open(context.Background(), backend.Options{
					Kind: backend.Redis, RedisAddrs: []string{addr}, Prefix: redistest.Prefix(b), Timeout: 2 * time.Second,
					RedisOptions: []redislimit.Option{redislimit.WithBreaker(redislimit.NewBreaker(5, time.Second))},
				}, cfg.Limits())
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				bm := promlimit.NewBackendMetrics(promlimit.BackendOptions{})
				prometheus.NewRegistry().MustRegister(bm)
				srv, err := hotlimitd.New(hotlimitd.Options{Config: func() *config.Config { return cfg }, Backend: st, Observers: []admission.Observer{bm}})
				if err != nil {
					b.Fatal(err)
				}
				conn := serveRaw(b, srv)
				req := request("bench")
				for j := range n {
					req.Descriptors = append(req.Descriptors, desc("d"+strconv.Itoa(j), "k"+strconv.Itoa(j)))
				}
				wire, err := proto.Marshal(req)
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				const method = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
				resp := new(rlsv3.RateLimitResponse)
				if err := conn.Invoke(ctx, method, wire, resp, grpc.ForceCodecV2(wireCodec{})); err != nil {
					b.Fatal(err)
				}
				if len(resp.Statuses) != n || resp.OverallCode != rlsv3.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit == nil {
					b.Fatalf("response %v, want %d statuses, OK, limited", resp, n)
				}
				b.SetParallelism(max(1, callers/max(1, runtime.GOMAXPROCS(0))))
				b.ReportAllocs()
				cpu0 := processCPU()
				defer func() {
					b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
				}()
				if callers == 1 {
					for b.Loop() {
						if err := conn.Invoke(ctx, method, wire, nil, grpc.ForceCodecV2(wireCodec{})); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						cctx, cancel := ctx, context.CancelFunc(nil)
						if bc.deadline {
							cctx, cancel = context.WithTimeout(ctx, time.Minute)
						}
						err := conn.Invoke(cctx, method, wire, nil, grpc.ForceCodecV2(wireCodec{}))
						if cancel != nil {
							cancel()
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// processCPU returns the CPU time (user and system) this process has
// used: the client's and the server's, not redis-server's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serveRaw serves s on 127.0.0.1:0 with the gRPC server options
// cmd/hotlimitd gives it and returns a client connection.
func serveRaw(t testing.TB, s *hotlimitd.Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(hotlimitd.ServerOption())
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
	return conn
}

// wireCodec sends a request's wire bytes as they are ([]byte) and reads
// the response as protobuf, or drops it (a nil response).
type wireCodec struct{}

func (wireCodec) Name() string { return "proto" }

func (wireCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (wireCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(proto.Message); ok && m != nil {
		return proto.Unmarshal(data.Materialize(), m)
	}
	return nil
}
