package otellimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/httplimit"
)

// TestRouteGroupOnSpanLongName: a route group name may be up to 64 bytes
// (httplimit.Group.Name: "letters, digits and \"._-\", at most 64
// bytes"), and hotlimit.route_group is documented as "a group name of
// httplimit.Config.Groups", with only MaxGroups (256) bounding its
// distinct values on spans. For one request of a 40-byte group, the
// "hotlimit.decide" span must carry that group's name, as the
// "hotlimit.decision" event and hotlimit.http.requests of the same
// request do, not "_OTHER".
func TestRouteGroupOnSpanLongName(t *testing.T) {
	const group = "reports-export-monthly-aggregation-v2-eu" // 40 bytes, a valid name
	rg := newRig()
	obs, err := New(Options{MeterProvider: rg.mp, TracerProvider: rg.tp, Spans: SpansAll})
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Hour}},
		Groups:       []httplimit.Group{{Name: group, Limit: "l"}},
		DefaultGroup: group,
		Key:          httplimit.TokenKey("Authorization"),
		Hook:         obs.Hook,
		Observers:    []admission.Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	send(rg, m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), "/", rawToken)
	spanGroup, eventGroup := "<none>", "<none>"
	for _, s := range rg.sr.Ended() {
		if s.Name() == "hotlimit.decide" {
			for _, kv := range s.Attributes() {
				if kv.Key == keyGroup {
					spanGroup = kv.Value.AsString()
				}
			}
		}
		for _, e := range s.Events() {
			if e.Name == "hotlimit.decision" {
				for _, kv := range e.Attributes {
					if kv.Key == keyGroup {
						eventGroup = kv.Value.AsString()
					}
				}
			}
		}
	}
	if eventGroup != group {
		t.Fatalf("event hotlimit.route_group %q, want %q", eventGroup, group)
	}
	if spanGroup != group {
		t.Errorf("hotlimit.decide span: hotlimit.route_group %q, want %q (the request's event says %q)", spanGroup, group, eventGroup)
	}
}
