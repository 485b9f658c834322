package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestShutdownEndsHealthWatch: a client watching health (grpc-go's
// client-side health checking keeps a Watch open) sees NOT_SERVING when
// SIGTERM arrives, and then its stream ends, so that the graceful stop
// finishes without waiting -shutdown-grace (1m here) and stopping RPCs.
func TestShutdownEndsHealthWatch(t *testing.T) {
	r := startCmd(t, nil)
	// The deadline only turns a stream that never ends into a failure
	// rather than a hang; nothing waits for it when the server is right.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hc := healthpb.NewHealthClient(r.conn)
	var watches []healthpb.Health_WatchClient
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatal(err)
		}
		if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("watch %q: %v, %v", svc, m, err)
		}
		watches = append(watches, w)
	}
	r.sigs <- syscall.SIGTERM
	for i, w := range watches {
		if m, err := w.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("watch %d after SIGTERM: %v, %v", i, m, err)
		}
		if m, err := w.Recv(); err == nil {
			t.Fatalf("watch %d: %v after NOT_SERVING, want the stream to end", i, m)
		}
	}
	if err := <-r.done; err != nil {
		t.Fatalf("run: %v", err)
	}
	r.a = nil
	if logs := r.logs.String(); strings.Contains(logs, "outlived") {
		t.Fatalf("the health watches held the graceful stop until -shutdown-grace:\n%s", logs)
	}
}

// TestRedisClientLogs: the Redis client's own messages (go-redis writes
// a line per failed dial) go through the command's log, as JSON with
// -log-format json at -log-level debug, not as plain lines on standard
// error that break a JSON log and bypass -log-level.
func TestRedisClientLogs(t *testing.T) {
	r := startCmd(t, nil, "-log-format", "json", "-log-level", "debug")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	c := redis.NewClient(&redis.Options{Addr: dead, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("Ping of a closed port answered")
	}
	r.stop(t)
	logs := r.logs.String()
	if !strings.Contains(logs, "failed to dial") {
		t.Fatalf("the Redis client's dial failure is not in the command's log:\n%s", logs)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("a log line is not JSON: %s", line)
		}
	}
}
