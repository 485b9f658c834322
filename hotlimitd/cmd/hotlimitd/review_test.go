package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

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
