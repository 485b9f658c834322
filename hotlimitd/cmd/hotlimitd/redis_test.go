package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// TestTwoReplicasOnRedis: two hotlimitd processes' worth of servers on
// one Redis (-backend redis) share each limit exactly: requests spread
// over both are admitted exactly requests_per_unit times. It needs
// HOTLIMIT_REDIS_ADDR (hotlimitd/test.sh starts a private redis-server).
func TestTwoReplicasOnRedis(t *testing.T) {
	addr := os.Getenv("HOTLIMIT_REDIS_ADDR")
	if addr == "" {
		t.Skip("HOTLIMIT_REDIS_ADDR is not set (hotlimitd/test.sh sets it)")
	}
	// A domain of its own, so that no earlier run's state counts.
	domain := fmt.Sprintf("replicas%d", time.Now().UnixNano())
	path := filepath.Join(t.TempDir(), "limits.yaml")
	yaml := "domain: " + domain + "\ndescriptors:\n  - key: user\n    rate_limit:\n      unit: hour\n      requests_per_unit: 7\n"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startCmd(t, nil, "-config", path, "-backend", "redis", "-redis", addr)
	b := startCmd(t, nil, "-config", path, "-backend", "redis", "-redis", addr)
	ok := 0
	for i := range 20 {
		r := a
		if i%2 == 1 {
			r = b
		}
		if r.ask(t, domain, "user", "ann").OverallCode == rlsv3.RateLimitResponse_OK {
			ok++
		}
	}
	if ok != 7 {
		t.Fatalf("%d of 20 admitted over two replicas, want exactly 7", ok)
	}
}
