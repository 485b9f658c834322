package admission

import (
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// TestSharedLocalGroupsByName: through one Local that two Pipelines
// share (a middleware's and an interceptor's, say), groups of one name
// share their keys and so their quota, as through any other backend,
// whatever their places in each Config.Groups, and groups of distinct
// names at the same place never do.
func TestSharedLocalGroupsByName(t *testing.T) {
	limits := map[string]hotlimit.Policy{"L": hotlimit.FixedWindow{Limit: 2, Window: time.Hour}}
	local, err := NewLocal(limits, hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	shared := func(map[string]hotlimit.Policy) (Backend, error) { return local, nil }
	pipeline := func(groups ...string) *Pipeline[testReq] {
		cfg := Config[testReq]{
			Limits:  limits,
			Key:     func(dst []byte, r testReq) ([]byte, error) { return AppendID(dst, "user", r.tok), nil },
			Backend: shared,
		}
		for _, g := range groups {
			cfg.Groups = append(cfg.Groups, Group[testReq]{Name: g, Limit: "L"})
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return p // not closed: closing it would close the shared Local
	}
	a := pipeline("api", "upload")
	b := pipeline("other", "api")

	const id = "user:u"
	if ka, kb := a.LayerKey(id, "api"), b.LayerKey(id, "api"); ka != kb {
		t.Errorf("group api: keys %q and %q through one Local, want one", ka, kb)
	}
	if ka, kb := a.LayerKey(id, "upload"), b.LayerKey(id, "other"); ka == kb {
		t.Errorf("groups upload and other: one key %q", ka)
	}
	if ka, kb := a.LayerKey(id, "api"), b.LayerKey(id, "other"); ka == kb {
		t.Errorf("groups api and other, each first in its Config.Groups: one key %q", ka)
	}

	decide := func(p *Pipeline[testReq], group int) Outcome {
		res := p.Decide(t.Context(), testReq{tok: "u"}, group, 1)
		defer p.Release(res)
		return res.Outcome
	}
	for i := range 2 {
		if got := decide(a, 0); got != OutcomeAllowed {
			t.Fatalf("a's api request %d: %v, want allowed", i, got)
		}
	}
	if got := decide(b, 1); got != OutcomeDenied {
		t.Errorf("b's api request after a's two used the quota: %v, want denied", got)
	}
	if got := decide(b, 0); got != OutcomeAllowed {
		t.Errorf("b's other request: %v, want allowed (a quota of its own)", got)
	}
}
