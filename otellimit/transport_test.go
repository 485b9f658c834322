package otellimit

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestOneObserverBothTransports: one Observer, the hook and an observer
// of a middleware and of an interceptor, counts each HTTP request in
// hotlimit.http.requests by hotlimit.route_group and each gRPC call in
// hotlimit.grpc.calls by hotlimit.method_group, never one under the
// other's names; only the request gets a "hotlimit.decision" event on
// its span; an Event without a Transport is a request.
func TestOneObserverBothTransports(t *testing.T) {
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp})
	if err != nil {
		t.Fatal(err)
	}
	clock := hotlimit.NewManualClock()
	mw, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"web": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
		Groups:       []httplimit.Group{{Name: "web", Limit: "web"}},
		DefaultGroup: "web",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
		Hook:         obs.Hook,
		Observers:    []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close()
	ic, err := grpclimit.New(grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"rpc": hotlimit.TokenBucket{Rate: hotlimit.PerHour(1), Burst: 1}},
		Groups:       []grpclimit.Group{{Name: "rpc", Limit: "rpc"}},
		DefaultGroup: "rpc",
		Key:          grpclimit.MetadataKey("authorization"),
		Backend:      admission.LocalBackend(hotlimit.WithClock(clock)),
		Hook:         obs.Hook,
		Observers:    []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()

	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	send(rg, h, "/", rawToken) // allowed
	send(rg, h, "/", rawToken) // denied
	u := ic.Unary()
	call := func() {
		ctx, span := rg.tp.Tracer("test").Start(context.Background(), "call")
		defer span.End()
		ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+rawToken))
		u(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/svc.A/M"}, func(ctx context.Context, req any) (any, error) { return req, nil })
	}
	call() // allowed
	call() // denied
	obs.Hook(admission.Event{Group: "hand", Outcome: admission.OutcomeExempt})

	compare(t, rg.collect(t), map[string]int64{
		"hotlimit.http.requests{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.outcome=allowed,hotlimit.route_group=web}": 1,
		"hotlimit.http.requests{hotlimit.algorithm=fixed_window,hotlimit.identity.kind=tok,hotlimit.outcome=denied,hotlimit.route_group=web}":  1,
		"hotlimit.http.requests{hotlimit.outcome=exempt,hotlimit.route_group=hand}":                                                            1,
		"hotlimit.grpc.calls{hotlimit.algorithm=token_bucket,hotlimit.identity.kind=tok,hotlimit.method_group=rpc,hotlimit.outcome=allowed}":   1,
		"hotlimit.grpc.calls{hotlimit.algorithm=token_bucket,hotlimit.identity.kind=tok,hotlimit.method_group=rpc,hotlimit.outcome=denied}":    1,
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=allowed,hotlimit.limit=web}":                        1,
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=denied,hotlimit.limit=web}":                         1,
		"hotlimit.backend.duration{hotlimit.algorithm=token_bucket,hotlimit.backend.result=allowed,hotlimit.limit=rpc}":                        1,
		"hotlimit.backend.duration{hotlimit.algorithm=token_bucket,hotlimit.backend.result=denied,hotlimit.limit=rpc}":                         1,
		"hotlimit.backend.remaining{hotlimit.algorithm=fixed_window,hotlimit.limit=web}":                                                       2,
		"hotlimit.backend.remaining{hotlimit.algorithm=token_bucket,hotlimit.limit=rpc}":                                                       2,
	})
	events := map[string]int{}
	for _, s := range rg.sr.Ended() {
		for _, e := range s.Events() {
			if e.Name != "hotlimit.decision" {
				t.Errorf("span %s: event %q", s.Name(), e.Name)
			}
			events[s.Name()]++
		}
	}
	if events["request"] != 2 || events["call"] != 0 || len(events) > 2 {
		t.Errorf("decision events by span: %v, want 2 on the requests' spans and none on the calls'", events)
	}
}
