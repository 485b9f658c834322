package grpclimit_test

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// TestIdentitiesOneDecision: a per-token limit (the group's) and a per-peer
// limit (Config.Identities) decide each call together, all or nothing,
// and every decided call, admitted or refused, carries quota metadata for
// each: one item per layer in the ratelimit and ratelimit-policy
// entries.
func TestIdentitiesOneDecision(t *testing.T) {
	clock := hotlimit.NewManualClock()
	clock.Set(1000 * time.Second)
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"per-token": hotlimit.FixedWindow{Limit: 5, Window: time.Minute},
			"per-ip":    hotlimit.FixedWindow{Limit: 2, Window: time.Minute},
		},
		Groups:       []grpclimit.Group{{Name: "health", Methods: []string{"/grpc.health.v1.Health/*"}, Limit: "per-token"}},
		DefaultGroup: "health",
		Key:          grpclimit.MetadataKey("authorization"),
		Identities:   []grpclimit.IdentityLimit{{Limit: "per-ip", Key: grpclimit.PeerKey(nil)}},
	})
	c := serveIC(t, ic)
	const wantPolicy = `"per-token";q=5;w=60, "per-ip";q=2;w=60`
	// The clock is at 1000 s: both windows end in 20 s.
	for i, want := range []struct {
		tok    string
		ok     bool
		layers string
	}{
		{"a", true, `"per-token";r=4;t=20, "per-ip";r=1;t=20`},
		{"a", true, `"per-token";r=3;t=20, "per-ip";r=0;t=20`},
		{"a", false, `"per-token";r=3;t=20, "per-ip";r=0;t=20`}, // the peer refuses: the token keeps its 3
		{"b", false, `"per-token";r=5, "per-ip";r=0;t=20`},      // a fresh token, refused by the peer: untouched
	} {
		md, err := call(bearer(testCtx(t), want.tok), c)
		if (err == nil) != want.ok {
			t.Fatalf("call %d: %v", i, err)
		}
		if got := one(t, md, grpclimit.MDPolicy); got != wantPolicy {
			t.Errorf("call %d: %s = %q, want %q", i, grpclimit.MDPolicy, got, wantPolicy)
		}
		if got := one(t, md, grpclimit.MDLayers); got != want.layers {
			t.Errorf("call %d: %s = %q, want %q", i, grpclimit.MDLayers, got, want.layers)
		}
	}
}
