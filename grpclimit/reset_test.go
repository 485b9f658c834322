package grpclimit_test

import (
	"context"
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// Reset gives an identity back its whole quota in every group and in the
// global layer, and touches no other identity; a backend that cannot
// reset says so.
func TestReset(t *testing.T) {
	clock := hotlimit.NewManualClock()
	ic := newIC(t, clock, grpclimit.Config{
		Limits: map[string]hotlimit.Policy{
			"check":  hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
			"list":   hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
			"global": hotlimit.FixedWindow{Limit: 3, Window: time.Hour},
		},
		Groups: []grpclimit.Group{
			{Name: "checks", Methods: []string{mCheck}, Limit: "check"},
			{Name: "lists", Methods: []string{mList}, Limit: "list"},
		},
		DefaultGroup: "checks",
		Global:       "global",
		Key:          grpclimit.MetadataKey("authorization"),
	})
	c := serveIC(t, ic)
	ctx := testCtx(t)
	alice, bob := bearer(ctx, "alice-token"), bearer(ctx, "bob-token")
	use := func(ctx context.Context) {
		if _, err := call(ctx, c); err != nil {
			t.Fatal(err)
		}
		if _, err := c.List(ctx, &healthpb.HealthListRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	use(alice)
	use(bob)
	if err := ic.Reset(ctx, admission.TokenIdentity("alice-token")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		limit, token, group string
		want                int64
	}{
		{"check", "alice-token", "checks", 2},
		{"list", "alice-token", "lists", 5},
		{"global", "alice-token", "", 3},
		{"check", "bob-token", "checks", 1},
		{"global", "bob-token", "", 1},
	} {
		if r := remaining(t, ic, tc.limit, tokenKey(t, ic, tc.token, tc.group)); r != tc.want {
			t.Errorf("%s of %s: Remaining %d, want %d", tc.limit, tc.token, r, tc.want)
		}
	}
	if md, err := call(alice, c); err != nil || one(t, md, grpclimit.MDRemaining) != "1" {
		t.Fatalf("call after Reset: %v, metadata %v", err, md)
	}

	nr := newIC(t, nil, grpclimit.Config{
		Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Hour}},
		Groups:       []grpclimit.Group{{Name: "g", Limit: "l"}},
		DefaultGroup: "g",
		Key:          grpclimit.MetadataKey("authorization"),
		Backend:      func(map[string]hotlimit.Policy) (admission.Backend, error) { return failing{}, nil },
	})
	if err := nr.Reset(ctx, "tok:x"); !errors.Is(err, errStoreDown) {
		t.Errorf("backend whose Reset fails: %v, want its error", err)
	}
}
