package otellimit

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
	"go.opentelemetry.io/otel/trace"
)

// tracingBackend is a Local whose decisions start a span of their own,
// as a Redis client's instrumentation would.
type tracingBackend struct {
	*admission.Local
	tr trace.Tracer
}

func (b tracingBackend) AllowStates(ctx context.Context, ls []admission.Layer, st []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	_, span := b.tr.Start(ctx, "store")
	defer span.End()
	return b.Local.AllowStates(ctx, ls, st)
}

// TestDecideSpan: with SpansAll and no Hook, the observer's
// "hotlimit.decide" span is a child of the request's, encloses the
// backend's own span, and carries the group limit, its algorithm, the
// number of layers, the identity kind and the route group, then the
// result and the capacity left.
func TestDecideSpan(t *testing.T) {
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: SpansAll})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Limits: map[string]hotlimit.Policy{
			"l":   hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
			"all": hotlimit.TokenBucket{Rate: hotlimit.PerHour(10), Burst: 10},
		},
		Groups:       []httplimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Global:       "all",
		Key:          httplimit.TokenKey("Authorization"),
		Backend: func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
			b, err := admission.LocalBackend(hotlimit.WithSweepInterval(0))(limits)
			l, _ := b.(*admission.Local)
			return tracingBackend{l, rg.tp.Tracer("store")}, err
		},
		Observers: []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	send(rg, m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "/", rawToken)
	spans := map[string]trace.SpanContext{}
	parents := map[string]trace.SpanContext{}
	var attrs []string
	for _, s := range rg.sr.Ended() {
		spans[s.Name()], parents[s.Name()] = s.SpanContext(), s.Parent()
		if s.Name() == "hotlimit.decide" {
			for _, kv := range s.Attributes() {
				attrs = append(attrs, string(kv.Key)+"="+kv.Value.String())
			}
		}
	}
	if len(spans) != 3 || !parents["hotlimit.decide"].Equal(spans["request"]) || !parents["store"].Equal(spans["hotlimit.decide"]) {
		t.Fatalf("spans %v, parents %v; want the decide span under the request's and the store's under it", spans, parents)
	}
	sort.Strings(attrs)
	want := "hotlimit.algorithm=fixed_window hotlimit.backend.result=allowed hotlimit.identity.kind=tok hotlimit.layers=2 hotlimit.limit=l hotlimit.remaining=4 hotlimit.route_group=g"
	if got := strings.Join(attrs, " "); got != want {
		t.Errorf("decide span attributes:\n%s\nwant\n%s", got, want)
	}
}
