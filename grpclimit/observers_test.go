package grpclimit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// recordingObserver records the outcome and group of every event.
type recordingObserver struct {
	mu  sync.Mutex
	got []string
}

func (o *recordingObserver) Begin(ctx context.Context, _ *admission.Event) context.Context {
	return ctx
}

func (o *recordingObserver) Observe(_ context.Context, ev *admission.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.got = append(o.got, ev.Group+"/"+ev.Limit+"/"+ev.Result.Outcome.String())
}

// TestConfigObservers: the observers in Config.Observers see every
// decision of the interceptor's backend, as httplimit's do.
func TestConfigObservers(t *testing.T) {
	obs := &recordingObserver{}
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
		Groups:       []grpclimit.Group{{Name: "health", Limit: "l"}},
		DefaultGroup: "health",
		Key:          grpclimit.PeerKey(nil),
		Observers:    []admission.Observer{obs},
	})
	client := serveIC(t, ic)
	for i, want := range []codes.Code{codes.OK, codes.ResourceExhausted} {
		if _, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{}); status.Code(err) != want {
			t.Fatalf("call %d: %v, want %v", i, err, want)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if want := []string{"health/l/allowed", "health/l/denied"}; len(obs.got) != 2 || obs.got[0] != want[0] || obs.got[1] != want[1] {
		t.Fatalf("observed %q, want %q", obs.got, want)
	}
}
