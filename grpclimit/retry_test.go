package grpclimit_test

import (
	"github.com/hotlimit/hotlimit/admission"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// retryConfig is a service config whose retry policy covers
// RESOURCE_EXHAUSTED on the health service: up to 4 attempts, 1 ms apart
// unless the server pushes back.
const retryConfig = `{"methodConfig": [{
	"name": [{"service": "grpc.health.v1.Health"}],
	"retryPolicy": {
		"maxAttempts": 4,
		"initialBackoff": "0.001s",
		"maxBackoff": "0.001s",
		"backoffMultiplier": 1,
		"retryableStatusCodes": ["RESOURCE_EXHAUSTED"]
	}
}]}`

// TestClientRetriesObeyPushback: a grpc-go client whose retry policy
// covers RESOURCE_EXHAUSTED retries a refusal that can pass later only
// after the wait the interceptor pushes back (grpc-retry-pushback-ms),
// and never retries a refusal that can never pass, with the quota
// metadata on or off. The server counts the attempts; the clock is
// frozen, so every attempt of a refused call is refused again. Nothing
// depends on scheduling: the client makes exactly maxAttempts attempts
// (or 1) whatever the timing, and cannot finish before it has waited the
// pushbacks out.
func TestClientRetriesObeyPushback(t *testing.T) {
	for _, noMD := range []bool{false, true} {
		clock := hotlimit.NewManualClock()
		var attempts atomic.Int64
		ic := newIC(t, clock, grpclimit.Config{
			Limits: map[string]hotlimit.Policy{"l": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(20), Burst: 2}}, // 50 ms a unit
			Groups: []grpclimit.Group{{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "l",
				Costs: map[string]int64{mList: 2}}},
			DefaultGroup: "health",
			Key:          grpclimit.MetadataKey("authorization"),
			NoMetadata:   noMD,
			Hook:         func(admission.Event) { attempts.Add(1) },
		})
		c := serveDial(t, "tcp4", []grpc.DialOption{grpc.WithDefaultServiceConfig(retryConfig)}, grpcOpts(ic)...)
		ctx := bearer(testCtx(t), "t")
		if _, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("NoMetadata %t: first call: %v", noMD, err)
		}
		// One unit left, List costs 2: refused for 50 ms, and again at
		// every attempt on the frozen clock.
		attempts.Store(0)
		start := time.Now()
		_, err := c.List(ctx, &healthpb.HealthListRequest{})
		elapsed := time.Since(start)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("NoMetadata %t: List: %v", noMD, err)
		}
		if n := attempts.Load(); n != 4 {
			t.Errorf("NoMetadata %t: a refusal for 50 ms was attempted %d times, want 4 (the client retries it)", noMD, n)
		}
		if elapsed < 3*50*time.Millisecond {
			t.Errorf("NoMetadata %t: 4 attempts took %v, less than the 3 pushbacks of 50 ms", noMD, elapsed)
		}

		// A capacity lowered below List's cost: it can never pass.
		if err := ic.Backend().(*admission.Local).Classes().SetPolicy("l", hotlimit.TokenBucket{Rate: hotlimit.PerSecond(20), Burst: 1}); err != nil {
			t.Fatal(err)
		}
		attempts.Store(0)
		if _, err := c.List(ctx, &healthpb.HealthListRequest{}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("NoMetadata %t: never: %v", noMD, err)
		}
		if n := attempts.Load(); n != 1 {
			t.Errorf("NoMetadata %t: a call that can never pass was attempted %d times, want 1", noMD, n)
		}
		// No key: it can never pass as it is.
		attempts.Store(0)
		if _, err := c.Check(testCtx(t), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("NoMetadata %t: no key: %v", noMD, err)
		}
		if n := attempts.Load(); n != 1 {
			t.Errorf("NoMetadata %t: a call without a key was attempted %d times, want 1", noMD, n)
		}
	}
}
