package hotlimitd_test

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	rlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd"
	"github.com/hotlimit/hotlimit/hotlimitd/backend"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/internal/redistest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// replicaRules: each user gets 60 units, a path 90, shared by every
// request of any user; a unit comes back a day after it was taken, so
// no test sees one refill and the totals are exact on any schedule.
const replicaRules = `domain: replicas
descriptors:
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1, algorithm: token_bucket, burst: 60}
  - key: path
    rate_limit: {unit: day, requests_per_unit: 1, algorithm: token_bucket, burst: 90}
`

// replicaConfig returns replicaRules' configuration. It fails the test
// in CI when the Redis that hotlimitd/test.sh starts is not there (the
// tests that need it skip elsewhere).
func replicaConfig(t *testing.T) *config.Config {
	t.Helper()
	if os.Getenv(redistest.AddrEnv) == "" && os.Getenv("CI") == "true" {
		t.Fatalf("%s is not set in CI: run hotlimitd/test.sh, which starts a private redis-server and Cluster", redistest.AddrEnv)
	}
	cfg, err := config.Parse("replicas.yaml", []byte(replicaRules))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// replica is one hotlimitd: a Server on its own Store, served over gRPC
// on a loopback port, and a client connected to it.
type replica struct {
	client rlsv3.RateLimitServiceClient
}

// startReplica starts a replica of cfg on a store opened with o; it
// stops when the test ends.
func startReplica(t *testing.T, cfg *config.Config, o backend.Options) *replica {
	t.Helper()
	st, err := backend.Open(context.Background(), o, cfg.Limits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := hotlimitd.New(hotlimitd.Options{Config: func() *config.Config { return cfg }, Backend: st})
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	srv.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &replica{client: rlsv3.NewRateLimitServiceClient(conn)}
}

// replicaRequest asks for one hit of each (key, value) descriptor.
func replicaRequest(kv ...string) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: "replicas"}
	for i := 0; i+1 < len(kv); i += 2 {
		req.Descriptors = append(req.Descriptors, &rlv3.RateLimitDescriptor{
			Entries: []*rlv3.RateLimitDescriptor_Entry{{Key: kv[i], Value: kv[i+1]}},
		})
	}
	return req
}

// flood sends req from workers goroutines per replica, tries times each,
// and returns the responses whose overall code is OK. An RPC error fails
// the test.
func flood(t *testing.T, rs []*replica, workers, tries int, req *rlsv3.RateLimitRequest) []*rlsv3.RateLimitResponse {
	t.Helper()
	var mu sync.Mutex
	var ok []*rlsv3.RateLimitResponse
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for _, r := range rs {
		for range workers {
			wg.Go(func() {
				for range tries {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := r.client.ShouldRateLimit(ctx, req)
					cancel()
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
					if resp.OverallCode == rlsv3.RateLimitResponse_OK {
						mu.Lock()
						ok = append(ok, resp)
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return ok
}

// TestTwoReplicasExact: two hotlimitd replicas on one Redis, and on one
// Redis Cluster, answering envoy's RLS requests over gRPC on loopback
// from many goroutines each, admit exactly a descriptor's limit between
// them: the limit_remaining of the admitted requests are exactly
// limit−1, ..., 0, each once (every admission saw every earlier one). A
// request of two descriptors is admitted on both or neither: the path,
// shared by two users, gives exactly what they were admitted.
func TestTwoReplicasExact(t *testing.T) {
	cfg := replicaConfig(t)
	for name, o := range map[string]backend.Options{
		"server": {Kind: backend.Redis, RedisAddrs: []string{redistest.Addr(t)}},
		// One request's descriptors have different keys: on a Cluster
		// they must share a slot.
		"cluster": {Kind: backend.Redis, RedisAddrs: redistest.ClusterAddrs(t), Cluster: true, HashTag: "replicas"},
	} {
		t.Run(name, func(t *testing.T) {
			o.Prefix, o.Timeout = redistest.Prefix(t), 5*time.Second
			rs := []*replica{startReplica(t, cfg, o), startReplica(t, cfg, o)}
			ok := flood(t, rs, 4, 25, replicaRequest("user", "alice"))
			checkExact(t, ok, 0, 60)

			// bob and then carol on one path: bob's 60, then carol's 30
			// of the path's 90. Path first: were the descriptors not
			// all or nothing, bob's refused requests would spend the
			// path's units.
			bob := flood(t, rs, 4, 25, replicaRequest("path", "/x", "user", "bob"))
			carol := flood(t, rs, 4, 25, replicaRequest("path", "/x", "user", "carol"))
			if len(bob) != 60 || len(carol) != 30 {
				t.Fatalf("one path: bob %d admitted, then carol %d; want bob's 60, then the path's 30 left", len(bob), len(carol))
			}
			checkExact(t, append(bob, carol...), 0, 90)
		})
	}
}

// checkExact fails the test unless ok holds limit responses whose
// descriptor i's limit_remaining are limit−1, ..., 0, each once.
func checkExact(t *testing.T, ok []*rlsv3.RateLimitResponse, i, limit int) {
	t.Helper()
	if len(ok) != limit {
		t.Fatalf("%d admitted by two replicas; want exactly %d", len(ok), limit)
	}
	seen := make([]bool, limit)
	for _, resp := range ok {
		st := resp.Statuses[i]
		r := int(st.LimitRemaining)
		if st.CurrentLimit == nil || r >= limit || seen[r] {
			t.Fatalf("limit_remaining %d (current_limit %v) seen twice or out of range: two admissions saw the same state", r, st.CurrentLimit)
		}
		seen[r] = true
	}
}

// TestTwoReplicasLease: two replicas on leases never admit more than a
// descriptor's limit between them (leases give up exactness: units one
// replica holds unspent can be refused to the other).
func TestTwoReplicasLease(t *testing.T) {
	cfg := replicaConfig(t)
	o := backend.Options{Kind: backend.Lease, RedisAddrs: []string{redistest.Addr(t)}, Prefix: redistest.Prefix(t), Timeout: 5 * time.Second, MaxLease: 5}
	rs := []*replica{startReplica(t, cfg, o), startReplica(t, cfg, o)}
	ok := flood(t, rs, 4, 25, replicaRequest("user", "alice"))
	if n := len(ok); n > 60 || n < 60-2*5 {
		t.Fatalf("%d admitted by two lease replicas; want at most 60, at least 50 (n·MaxLease less)", n)
	}
	for _, resp := range ok {
		if st := resp.Statuses[0]; st.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_DAY || st.CurrentLimit.GetRequestsPerUnit() != 1 {
			t.Fatalf("current_limit %v; want the user rule", st.CurrentLimit)
		}
	}
}
