package grpclimit_test

import (
	"context"
	"fmt"
	"github.com/hotlimit/hotlimit/admission"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// recorder collects the events of a hook as comparable lines.
type recorder struct {
	t  *testing.T
	mu sync.Mutex
	ev []string
}

func (r *recorder) hook(ev admission.Event) {
	m, ok := grpc.Method(ev.Context)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || m != ev.Method {
		r.t.Errorf("event of %s: its context's method is %q", ev.Method, m)
	}
	if ev.Transport != "grpc" {
		r.t.Errorf("event of %s: Transport %q, want grpc", ev.Method, ev.Transport)
	}
	d := ev.Decision
	retry := "-"
	switch {
	case d.RetryAfter == hotlimit.Never:
		retry = "never"
	case d.RetryAfter > 0:
		retry = d.RetryAfter.String()
	}
	r.ev = append(r.ev, fmt.Sprintf("%s %s %s kind=%q fallback=%t limit=%q alg=%q allowed=%t limit=%d rem=%d retry=%s",
		ev.Method, ev.Group, ev.Outcome, ev.IdentityKind, ev.Fallback, ev.Limit, ev.Algorithm,
		d.Allowed, d.Limit, d.Remaining, retry))
}

// A scripted sequence of calls on real servers yields exactly one event
// per call, with every outcome: admitted, denied for now and for good,
// exempt, the fallback to the peer, a key failure, and backend failures
// with Config.FailOpen and failing closed.
func TestHookEvents(t *testing.T) {
	clock := hotlimit.NewManualClock()
	rec := &recorder{t: t}
	ctx := testCtx(t)
	check := func(c healthpb.HealthClient, ctx context.Context) { call(ctx, c) }
	list := func(c healthpb.HealthClient, ctx context.Context) {
		c.List(ctx, &healthpb.HealthListRequest{})
	}
	limits := map[string]hotlimit.Policy{
		"l": hotlimit.FixedWindow{Limit: 3, Window: time.Minute},
		"t": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(1), Burst: 10},
	}

	// Limited by token, falling back to the peer; List costs more than
	// the capacity once it is lowered to 2 (New refuses a cost above the
	// capacity, a runtime change can still make one). The global layer
	// has more left, so "l" binds.
	ic := newIC(t, clock, grpclimit.Config{
		Limits: limits,
		Groups: []grpclimit.Group{
			{Name: "check", Methods: []string{mCheck}, Limit: "l"},
			{Name: "big", Methods: []string{mList}, Limit: "l", Cost: 3},
		},
		DefaultGroup: "check",
		Global:       "t",
		Key:          grpclimit.MetadataKey("authorization"),
		FallbackToIP: true,
		Hook:         rec.hook,
	})
	if err := ic.Backend().(*admission.Local).Classes().SetPolicy("l", hotlimit.FixedWindow{Limit: 2, Window: time.Minute}); err != nil {
		t.Fatal(err)
	}
	c := serveIC(t, ic)
	check(c, bearer(ctx, "a"))
	check(c, bearer(ctx, "a"))
	check(c, bearer(ctx, "a"))
	list(c, bearer(ctx, "a"))
	check(c, ctx)

	// An exempt group, and a key failure without FallbackToIP.
	c = serveIC(t, newIC(t, clock, grpclimit.Config{
		Limits: limits,
		Groups: []grpclimit.Group{
			{Name: "free", Methods: []string{mCheck}, Exempt: true},
			{Name: "rest", Limit: "l"},
		},
		DefaultGroup: "rest",
		Key:          grpclimit.MetadataKey("authorization"),
		Hook:         rec.hook,
	}))
	check(c, ctx)
	list(c, ctx)

	// Backend failures.
	for _, failOpen := range []bool{true, false} {
		c = serveIC(t, newIC(t, nil, grpclimit.Config{
			Limits:       limits,
			Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
			DefaultGroup: "g",
			Key:          grpclimit.MetadataKey("authorization"),
			FailOpen:     failOpen,
			Backend:      func(map[string]hotlimit.Policy) (admission.Backend, error) { return failing{}, nil },
			Hook:         rec.hook,
		}))
		check(c, bearer(ctx, "a"))
	}

	want := []string{
		`/grpc.health.v1.Health/Check check allowed kind="tok" fallback=false limit="l" alg="FixedWindow" allowed=true limit=2 rem=1 retry=-`,
		`/grpc.health.v1.Health/Check check allowed kind="tok" fallback=false limit="l" alg="FixedWindow" allowed=true limit=2 rem=0 retry=-`,
		`/grpc.health.v1.Health/Check check denied kind="tok" fallback=false limit="l" alg="FixedWindow" allowed=false limit=2 rem=0 retry=1m0s`,
		`/grpc.health.v1.Health/List big denied_never kind="tok" fallback=false limit="l" alg="FixedWindow" allowed=false limit=2 rem=2 retry=never`,
		`/grpc.health.v1.Health/Check check allowed kind="ip" fallback=true limit="l" alg="FixedWindow" allowed=true limit=2 rem=1 retry=-`,
		`/grpc.health.v1.Health/Check free exempt kind="" fallback=false limit="" alg="" allowed=false limit=0 rem=0 retry=-`,
		`/grpc.health.v1.Health/List rest key_denied kind="" fallback=false limit="" alg="" allowed=false limit=0 rem=0 retry=-`,
		`/grpc.health.v1.Health/Check g error_allowed kind="tok" fallback=false limit="" alg="" allowed=false limit=0 rem=0 retry=-`,
		`/grpc.health.v1.Health/Check g error_denied kind="tok" fallback=false limit="" alg="" allowed=false limit=0 rem=0 retry=-`,
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.ev, want) {
		t.Errorf("events:\n%s\nwant:\n%s", join(rec.ev), join(want))
	}
}

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += "\t" + x + "\n"
	}
	return out
}

// A hook adds no allocation to a call once its identity kind is known,
// and an Interceptor without one allocates exactly as before: the same
// count with Hook nil and with a hook that does nothing.
func TestHookAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items: allocation counts vary")
	}
	addr := net.TCPAddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:4242"))
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: addr})
	ctx = grpc.NewContextWithServerTransportStream(ctx, headerStream{})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer t"))
	info := &grpc.UnaryServerInfo{FullMethod: mCheck}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	allocs := func(hook func(admission.Event)) float64 {
		cfg := benchConfig()
		cfg.Hook = hook
		u := newIC(t, nil, cfg).Unary()
		return testing.AllocsPerRun(200, func() {
			if _, err := u(ctx, nil, info, handler); err != nil {
				t.Fatal(err)
			}
		})
	}
	var n int
	without, with := allocs(nil), allocs(func(ev admission.Event) {
		if ev.Outcome == admission.OutcomeAllowed {
			n++
		}
	})
	if with != without {
		t.Errorf("allocations per call: %v with a hook, %v without", with, without)
	}
	if n != 201 {
		t.Errorf("the hook saw %d admitted calls, want 201", n)
	}
}
