package grpclimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// TestMissingNamesLayer: a call refused for a missing identity says, over
// a real gRPC connection, which layer's identity it lacks, in its
// ErrorInfo's "missing" entry: the group's limit without the token
// Config.Key reads, the identity layer's limit without the tenant its Key
// reads; never the identity itself. A call with both passes.
func TestMissingNamesLayer(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	var missing []string
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"per-token":  hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
			"per-tenant": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
		},
		Groups:       []grpclimit.Group{{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "per-token"}},
		DefaultGroup: "health",
		Key:          grpclimit.MetadataKey("authorization"),
		Identities:   []grpclimit.IdentityLimit{{Limit: "per-tenant", Key: grpclimit.MetadataKey("x-tenant")}},
	})
	c := serveIC(t, ic)
	const tok, tenant = "secret-token-1", "acme-secret"
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		md   []string
		want string // the missing layer; "" for an admitted call
	}{
		{"no token", []string{"x-tenant", tenant}, "per-token"},
		{"no tenant", []string{"authorization", "Bearer " + tok}, "per-tenant"},
		{"neither", nil, "per-token"},
		{"both", []string{"authorization", "Bearer " + tok, "x-tenant", tenant}, ""},
	} {
		_, err := call(metadata.AppendToOutgoingContext(ctx, tc.md...), c)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v, want admitted", tc.name, err)
			}
			continue
		}
		d := detailsOf(t, err)
		if d.code != codes.ResourceExhausted || d.reason() != grpclimit.ReasonKeyMissing || d.retryDelay() != -1 {
			t.Fatalf("%s: %v %q retry %v, want ResourceExhausted %s without RetryInfo", tc.name, d.code, d.reason(), d.retryDelay(), grpclimit.ReasonKeyMissing)
		}
		got := d.info.GetMetadata()
		if len(got) != 1 || got["missing"] != tc.want {
			t.Errorf("%s: ErrorInfo metadata %v, want missing=%s", tc.name, got, tc.want)
		}
		missing = append(missing, got["missing"])
		if s := err.Error() + d.info.String(); strings.Contains(s, tok) || strings.Contains(s, tenant) {
			t.Errorf("%s: the refusal shows an identity: %s", tc.name, s)
		}
	}
	if len(missing) != 3 {
		t.Errorf("refusals %q, want 3", missing)
	}
}
