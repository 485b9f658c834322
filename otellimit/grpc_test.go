package otellimit

import (
	"context"
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// failingBackend cannot decide.
type failingBackend struct{}

func (failingBackend) AllowStates(context.Context, []admission.Layer, []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	return hotlimit.Decision{}, -1, errors.New("store down")
}

func (failingBackend) Reset(context.Context, string, string) error { return errors.New("store down") }

func (failingBackend) Close() error { return nil }

// Calls through real grpclimit interceptors, with every outcome, are
// counted exactly in hotlimit.grpc.calls, by method group, outcome,
// algorithm and identity kind, with kinds beyond MaxIdentityKinds as
// "_OTHER" and no token or key in any attribute.
func TestGRPCCalls(t *testing.T) {
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, MaxIdentityKinds: 1})
	if err != nil {
		t.Fatal(err)
	}
	clock := hotlimit.NewManualClock()
	limits := map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 3, Window: time.Minute}}
	build := func(cfg grpclimit.Config) *grpclimit.Interceptor {
		t.Helper()
		cfg.Limits, cfg.Hook = limits, obs.Hook
		if cfg.Backend == nil {
			cfg.Backend = admission.LocalBackend(hotlimit.WithClock(clock))
		}
		if cfg.Groups == nil {
			cfg.Groups, cfg.DefaultGroup = []grpclimit.Group{{Name: "g", Limit: "l"}}, "g"
		}
		if cfg.Key == nil {
			cfg.Key = grpclimit.MetadataKey("authorization")
		}
		ic, err := grpclimit.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ic.Close() })
		return ic
	}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	tok := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+rawToken))
	call := func(u grpc.UnaryServerInterceptor, ctx context.Context, method string) {
		u(ctx, nil, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	}

	ic := build(grpclimit.Config{
		Groups: []grpclimit.Group{
			{Name: "check", Methods: []string{"/svc.A/Check"}, Limit: "l"},
			{Name: "big", Methods: []string{"/svc.A/Big"}, Limit: "l", Cost: 3},
			{Name: "free", Methods: []string{"/svc.A/Health"}, Exempt: true},
		},
		DefaultGroup: "check",
	})
	// New refuses a cost above the capacity; lowered at runtime, the
	// capacity leaves Big's cost above it.
	if err := ic.Backend().(*admission.Local).Classes().SetPolicy("l", hotlimit.FixedWindow{Limit: 2, Window: time.Minute}); err != nil {
		t.Fatal(err)
	}
	u := ic.Unary()
	call(u, tok, "/svc.A/Check")                  // allowed
	call(u, tok, "/svc.A/Check")                  // allowed
	call(u, tok, "/svc.A/Check")                  // denied
	call(u, tok, "/svc.A/Big")                    // denied for good
	call(u, tok, "/svc.A/Health")                 // exempt
	call(u, context.Background(), "/svc.A/Check") // no key
	call(build(grpclimit.Config{FailOpen: true,
		Backend: func(map[string]hotlimit.Policy) (admission.Backend, error) { return failingBackend{}, nil }}).Unary(), tok, "/svc.B/X")
	call(build(grpclimit.Config{
		Backend: func(map[string]hotlimit.Policy) (admission.Backend, error) { return failingBackend{}, nil }}).Unary(), tok, "/svc.B/X")
	call(build(grpclimit.Config{Key: grpclimit.FuncKey("usr", func(context.Context) (string, bool) { return "u1", true })}).Unary(), tok, "/svc.B/X")

	want := map[string]int64{
		"hotlimit.grpc.calls{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.method_group=check,hotlimit.outcome=allowed}":    2,
		"hotlimit.grpc.calls{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.method_group=check,hotlimit.outcome=denied}":     1,
		"hotlimit.grpc.calls{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.method_group=big,hotlimit.outcome=denied_never}": 1,
		"hotlimit.grpc.calls{hotlimit.method_group=free,hotlimit.outcome=exempt}":                                                                 1,
		"hotlimit.grpc.calls{hotlimit.method_group=check,hotlimit.outcome=key_denied}":                                                            1,
		"hotlimit.grpc.calls{hotlimit.identity.kind=tok,hotlimit.method_group=g,hotlimit.outcome=error_allowed}":                                  1,
		"hotlimit.grpc.calls{hotlimit.identity.kind=tok,hotlimit.method_group=g,hotlimit.outcome=error_denied}":                                   1,
		"hotlimit.grpc.calls{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=_OTHER,hotlimit.method_group=g,hotlimit.outcome=allowed}":     1,
	}
	got := rg.collect(t)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s = %d", k, v)
		}
	}
}

// Hook allocates nothing once its attributes have been seen.
func TestGRPCHookAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items: allocation counts vary")
	}
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp})
	if err != nil {
		t.Fatal(err)
	}
	ev := admission.Event{Context: context.Background(), Transport: "grpc", Method: "/svc.A/Check", Group: "check",
		Outcome: admission.OutcomeAllowed, IdentityKind: "tok", Limit: "l", Algorithm: "FixedWindow"}
	if n := testing.AllocsPerRun(100, func() { obs.Hook(ev) }); n != 0 {
		t.Errorf("Hook allocates %v per call", n)
	}
	got := rg.collect(t)["hotlimit.grpc.calls{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.method_group=check,hotlimit.outcome=allowed}"]
	if got != 101 {
		t.Errorf("counted %d calls, want 101", got)
	}
}
