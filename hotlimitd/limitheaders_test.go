package hotlimitd_test

import (
	"context"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd"
)

// TestLimitHeaders: with Options.LimitHeaders, a response carries
// envoyproxy/ratelimit's three headers of the one status it would pick:
// the last OVER_LIMIT one, else the first with the least limit_remaining
// among the limited ones (a shadow one too); Reset is the status's
// duration_until_reset in whole seconds, rounded up. A response without
// a limited status has none.
func TestLimitHeaders(t *testing.T) {
	f := newFixture(t, testYAML, hotlimitd.Options{LimitHeaders: &hotlimitd.LimitHeaders{}})
	f.clock.Set(50*time.Second + 300*time.Millisecond)
	want := func(got map[string]string, limit, remaining, reset string) {
		t.Helper()
		w := map[string]string{"RateLimit-Limit": limit, "RateLimit-Remaining": remaining}
		if reset != "" {
			w["RateLimit-Reset"] = reset
		}
		if len(got) != len(w) {
			t.Fatalf("headers %v, want %v", got, w)
		}
		for k, v := range w {
			if got[k] != v {
				t.Fatalf("headers %v, want %v", got, w)
			}
		}
	}
	// user 3/min and path 2/min, each 1 left: the first of the least
	// (9.7s to the minute's end).
	want(headers(ask(t, f.srv, request("test", withHits(desc("user", "ann"), 2), desc("path", "/a")))), "3", "1", "10")
	// bob 2 left, path 0: the least, not the first.
	want(headers(ask(t, f.srv, request("test", desc("user", "bob"), desc("path", "/a")))), "2", "0", "10")
	// A shadow status counts: preview (1/min) has 0 left.
	want(headers(ask(t, f.srv, request("test", desc("user", "cat"), desc("preview", "p")))), "1", "0", "10")
	// OVER_LIMIT wins over a status with fewer left: bob (2 left) asks
	// 3; the refused request only reads preview (0 left, OK).
	resp := ask(t, f.srv, request("test", withHits(desc("user", "bob"), 3), desc("preview", "p")))
	if codesOf(resp) != "OVER_LIMIT OK" || remaining(resp)[0] != 2 || remaining(resp)[1] != 0 {
		t.Fatalf("codes %s, remaining %v", codesOf(resp), remaining(resp))
	}
	want(headers(resp), "3", "2", "10")
	// Two OVER_LIMIT: the last. path (0 left) and ann (1 left, asks 2).
	resp = ask(t, f.srv, request("test", desc("path", "/a"), withHits(desc("user", "ann"), 2)))
	if codesOf(resp) != "OVER_LIMIT OVER_LIMIT" {
		t.Fatalf("codes %s, remaining %v", codesOf(resp), remaining(resp))
	}
	want(headers(resp), "3", "1", "10")
	// Unlimited and unmatched only: no header.
	if h := headers(ask(t, f.srv, request("test", desc("internal", "x"), desc("nope", "y")))); len(h) != 0 {
		t.Fatalf("no limited descriptor: headers %v", h)
	}

	// Names of one's own, and draft-11's headers beside them.
	g := newFixture(t, testYAML, hotlimitd.Options{Headers: true, LimitHeaders: &hotlimitd.LimitHeaders{Limit: "X-RateLimit-Limit", Remaining: "X-RateLimit-Remaining", Reset: "X-RateLimit-Reset"}})
	g.clock.Set(59*time.Second + 999*time.Millisecond)
	h := headers(ask(t, g.srv, request("test", desc("user", "ann"))))
	if h["X-RateLimit-Limit"] != "3" || h["X-RateLimit-Remaining"] != "2" || h["X-RateLimit-Reset"] != "1" || h["RateLimit"] == "" || h["RateLimit-Policy"] == "" || len(h) != 5 {
		t.Fatalf("headers %v", h)
	}

	// A backend that cannot tell the layers' states: the status has
	// limit_remaining 0 and no duration_until_reset (not 0, "full"), and
	// so the headers have no Reset.
	n := newFixture(t, testYAML, hotlimitd.Options{})
	n2 := newFixtureConfig(t, n.cfg, hotlimitd.Options{LimitHeaders: &hotlimitd.LimitHeaders{}, Backend: allowOnly{n.local}})
	resp = ask(t, n2.srv, request("test", desc("user", "ann")))
	if seconds(resp, 0) != -1 {
		t.Fatalf("unknown state: duration_until_reset %v, want none", seconds(resp, 0))
	}
	want(headers(resp), "3", "0", "")
}

// allowOnly is a Backend that can tell neither the binding layer nor the
// layers' states after a decision (-1 and Remaining -1).
type allowOnly struct{ admission.Backend }

func (b allowOnly) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	for i := range states {
		states[i] = hotlimit.LayerState{Decision: hotlimit.Decision{Remaining: -1}}
	}
	d, _, err := b.Backend.AllowStates(ctx, layers, nil)
	return d, -1, err
}
