package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd/internal/bench"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// startRatelimit starts envoyproxy/ratelimit's service (-ratelimit-bin,
// its service_cmd, which run.sh installs at a pinned version) as the
// child, configured as its README and settings.go say: the configuration
// bench.Config gives hotlimitd (the same limits), as a file of its
// runtime directory; one Redis (REDIS_SOCKET_TYPE tcp, REDIS_URL -redis,
// REDIS_TYPE SINGLE, its default pool of 10 connections and 10 s
// timeout); its local cache of over-limit keys (-ratelimit-cache bytes,
// LOCAL_CACHE_SIZE_IN_BYTES) and its pipeline window
// (-ratelimit-window, REDIS_PIPELINE_WINDOW; radix v4 applies it to a
// Cluster only, and with one Redis its requests' commands go in one
// explicit pipeline each); a key prefix of the run's own
// (CACHE_KEY_PREFIX); its stats (-ratelimit-stats) to Prometheus
// (USE_STATSD false, USE_PROMETHEUS true: as hotlimitd records promlimit's
// metrics; not scraped) or off (DISABLE_STATS: no stats at all; its
// logging sink, the default without statsd, logs every timer sample and
// would cost it more than deciding); gRPC, HTTP, debug and Prometheus on
// free loopback ports. It
// returns the child, started, once a request is answered, and the gRPC
// address; remove dir when done.
func startRatelimit(f *flags, dir string) (*exec.Cmd, string, error) {
	if f.alg != string(bench.Window) {
		return nil, "", fmt.Errorf("-system ratelimit has fixed windows only: -alg %s", bench.Window)
	}
	conf := filepath.Join(dir, "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		return nil, "", err
	}
	alg, _ := bench.ParseAlgorithm(f.alg)
	if err := os.WriteFile(filepath.Join(conf, "bench.yaml"), bench.Config(alg, f.limit, f.unit, f.desc, f.over > 0), 0o644); err != nil {
		return nil, "", err
	}
	ports, err := bench.LoopbackPorts(4)
	if err != nil {
		return nil, "", err
	}
	child := exec.Command(f.ratelimitBin)
	child.Env = append(os.Environ(), bench.RatelimitEnv(dir, f.redis, fmt.Sprintf("rlsbench:%d:", time.Now().UnixNano()), ports)...)
	child.Env = append(child.Env,
		"REDIS_PIPELINE_WINDOW="+f.ratelimitWindow.String(),
		"LOCAL_CACHE_SIZE_IN_BYTES="+strconv.Itoa(f.ratelimitCache),
	)
	switch f.ratelimitStats {
	case "prometheus":
		child.Env = append(child.Env, "USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:"+strconv.Itoa(ports[3]))
	case "off":
		child.Env = append(child.Env, "DISABLE_STATS=true")
	default:
		return nil, "", fmt.Errorf("-ratelimit-stats %q: want prometheus or off", f.ratelimitStats)
	}
	child.Stderr = os.Stderr // its warnings and errors; stdout is its stats
	if err := child.Start(); err != nil {
		return nil, "", fmt.Errorf("-ratelimit-bin: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	if err := awaitRLS(addr, 30*time.Second); err != nil {
		child.Process.Kill()
		child.Wait()
		return nil, "", fmt.Errorf("envoyproxy/ratelimit: %w", err)
	}
	return child, addr, nil
}

// awaitRLS asks addr's RateLimitService until it answers a request of
// the bench's domain without error (its configuration loaded), for at
// most wait. The request's key (d0, "rlsbench-ready") is none of the
// load's.
func awaitRLS(addr string, wait time.Duration) error {
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer c.Close()
	client := rlsv3.NewRateLimitServiceClient(c)
	req := &rlsv3.RateLimitRequest{Domain: bench.Domain, HitsAddend: 1, Descriptors: []*commonrl.RateLimitDescriptor{
		{Entries: []*commonrl.RateLimitDescriptor_Entry{{Key: bench.DescriptorKey(0), Value: "rlsbench-ready"}}},
	}}
	end := time.Now().Add(wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := client.ShouldRateLimit(ctx, req)
		cancel()
		if err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OK && len(resp.Statuses) == 1 && resp.Statuses[0].CurrentLimit != nil {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("not configured yet: %v", resp)
		}
		if time.Now().After(end) {
			return errors.Join(fmt.Errorf("not answering after %v", wait), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
