package otellimit

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/httplimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestObserve: an HTTP observer handed to the middleware as an
// admission.Observer (no backend wrapper) records every backend decision
// in hotlimit.backend.duration and hotlimit.backend.remaining exactly as
// the wrapper does: by the group's limit and result, and by the binding
// limit, whatever decision the observer sees first.
func TestObserve(t *testing.T) {
	rg := newRig()
	clock := hotlimit.NewManualClock()
	down := new(atomic.Bool)
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: SpansOff})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"search": hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
			"cheap":  hotlimit.TokenBucket{Rate: hotlimit.PerHour(100), Burst: 100},
			"global": hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
		},
		Groups: []httplimit.Group{
			{Name: "search", Patterns: []string{"/search"}, Limit: "search"},
			{Name: "cheap", Limit: "cheap"},
		},
		DefaultGroup: "cheap",
		Global:       "global",
		Key:          httplimit.TokenKey("Authorization"),
		Backend:      switchableBackend(clock, down),
		Observers:    []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	down.Store(true)
	send(rg, h, "/other", rawToken+"-3") // backend down before cheap's first decision
	down.Store(false)
	send(rg, h, "/search", rawToken) // allowed; search 0 left, global 1
	send(rg, h, "/search", rawToken) // denied by search
	send(rg, h, "/other", rawToken)  // allowed; global 0 left, binding
	send(rg, h, "/other", rawToken)  // denied by global
	send(rg, h, "/search", "")       // no key: the backend is not asked
	down.Store(true)
	send(rg, h, "/search", rawToken+"-2") // backend down
	want := map[string]int64{
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=allowed,hotlimit.limit=search}":                 1,
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=denied,hotlimit.limit=search}":                  1,
		"hotlimit.backend.duration{hotlimit.algorithm=token_bucket,hotlimit.backend.result=allowed,hotlimit.limit=cheap}":                  1,
		"hotlimit.backend.duration{hotlimit.algorithm=token_bucket,hotlimit.backend.result=denied,hotlimit.limit=cheap}":                   1,
		"hotlimit.backend.duration{error.type=_OTHER,hotlimit.algorithm=fixed_window,hotlimit.backend.result=error,hotlimit.limit=search}": 1,
		"hotlimit.backend.duration{error.type=_OTHER,hotlimit.algorithm=token_bucket,hotlimit.backend.result=error,hotlimit.limit=cheap}":  1,
		"hotlimit.backend.remaining{hotlimit.algorithm=fixed_window,hotlimit.limit=search}":                                                2,
		"hotlimit.backend.remaining{hotlimit.algorithm=fixed_window,hotlimit.limit=global}":                                                2,
	}
	compare(t, rg.collect(t), want)
}

// TestObserveGRPC: the same observer in grpclimit.Config.Observers records
// every decision of the interceptor's backend, as its doc says it can.
func TestObserveGRPC(t *testing.T) {
	rg := newRig()
	clock := hotlimit.NewManualClock()
	down := new(atomic.Bool)
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: SpansOff})
	if err != nil {
		t.Fatal(err)
	}
	ic, err := grpclimit.New(grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
		Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          grpclimit.MetadataKey("authorization"),
		Backend:      switchableBackend(clock, down),
		Observers:    []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	u := ic.Unary()
	tok := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+rawToken))
	call := func(ctx context.Context) {
		u(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/svc.A/M"}, func(ctx context.Context, req any) (any, error) { return req, nil })
	}
	call(tok)                  // allowed
	call(tok)                  // denied
	call(context.Background()) // no key: the backend is not asked
	down.Store(true)
	call(tok) // backend down
	want := map[string]int64{
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=allowed,hotlimit.limit=l}":                 1,
		"hotlimit.backend.duration{hotlimit.algorithm=fixed_window,hotlimit.backend.result=denied,hotlimit.limit=l}":                  1,
		"hotlimit.backend.duration{error.type=_OTHER,hotlimit.algorithm=fixed_window,hotlimit.backend.result=error,hotlimit.limit=l}": 1,
		"hotlimit.backend.remaining{hotlimit.algorithm=fixed_window,hotlimit.limit=l}":                                                2,
	}
	compare(t, rg.collect(t), want)
}
