package admission

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// TestSharedLocalGroupsByName: through one Local that two Pipelines
// share (a middleware's and an interceptor's, say), groups of one name
// share their keys and so their quota, as through any other backend,
// whatever their places in each Config.Groups, and groups of distinct
// names at the same place never do.
func TestSharedLocalGroupsByName(t *testing.T) {
	limits := map[string]hotlimit.Policy{"L": hotlimit.FixedWindow{Limit: 2, Window: time.Hour}}
	local, err := newLocal(limits, hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	shared := func(map[string]hotlimit.Policy) (Backend, error) { return local, nil }
	pipeline := func(groups ...string) *Pipeline[testReq] {
		cfg := Config[testReq]{
			Limits:  limits,
			Key:     func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "user", r.tok), nil },
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

// unbound is a Local whose AllowStates does not say which layer bound.
type unbound struct{ *Local }

func (b unbound) AllowStates(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	d, _, err := b.Local.AllowStates(ctx, layers, states)
	return d, -1, err
}

// TestLimitUnreported: when the backend does not report the binding
// layer, Result.Limit and the Event every hook and observer gets name no
// limit (the pipeline's guess is not the decision's), as Limit's doc says.
func TestLimitUnreported(t *testing.T) {
	limits := map[string]hotlimit.Policy{
		"a": hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
		"b": hotlimit.FixedWindow{Limit: 1, Window: time.Hour},
	}
	p, err := New(Config[testReq]{
		Limits: limits,
		Groups: []Group[testReq]{{Name: "g", Limit: "a"}},
		Global: "b",
		Key:    func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "user", r.tok), nil },
		Backend: func(limits map[string]hotlimit.Policy) (Backend, error) {
			l, err := newLocal(limits, hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
			return unbound{l}, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range 2 {
		res := p.Decide(t.Context(), testReq{tok: "u"}, 0, 1)
		if res.BindingReported {
			t.Fatalf("request %d: BindingReported through a backend that reports none", i)
		}
		if name, alg := res.Limit(); name != "" || alg != "" {
			t.Errorf("request %d (%v): Limit() = %q, %q, want none", i, res.Outcome, name, alg)
		}
		if ev := res.Event(); ev.Limit != "" || ev.Algorithm != "" {
			t.Errorf("request %d (%v): Event.Limit, Algorithm = %q, %q, want none", i, res.Outcome, ev.Limit, ev.Algorithm)
		}
		p.Release(res)
	}
}

// TestSharedLocalMissingLimit: a Pipeline over a *Local built without
// one of Config.Limits (a Local shared from elsewhere) decides a group
// whose limits the Local has through them, with its states, and refuses
// one whose limit it lacks with an error wrapping ErrUnknownLimit (its
// failure policy's OutcomeErrorDenied), deciding nothing, as
// Local.AllowStates does; it never panics.
func TestSharedLocalMissingLimit(t *testing.T) {
	local, err := newLocal(map[string]hotlimit.Policy{"a": hotlimit.FixedWindow{Limit: 2, Window: time.Hour}},
		hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	p, err := New(Config[testReq]{
		Limits: map[string]hotlimit.Policy{
			"a": hotlimit.FixedWindow{Limit: 2, Window: time.Hour},
			"b": hotlimit.FixedWindow{Limit: 5, Window: time.Hour},
		},
		Groups:  []Group[testReq]{{Name: "has", Limit: "a"}, {Name: "lacks", Limit: "b"}},
		Key:     func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "user", r.tok), nil },
		Backend: func(map[string]hotlimit.Policy) (Backend, error) { return local, nil },
		States:  true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []Outcome{OutcomeAllowed, OutcomeAllowed, OutcomeDenied} {
		res := p.Decide(t.Context(), testReq{tok: "u"}, 0, 1)
		if res.Outcome != want || res.Layers() != 1 || !res.Item(0).Known || res.Item(0).Remaining != int64(max(1-i, 0)) || res.Item(0).Cost != 1 {
			t.Fatalf("group has, request %d: %v, %d layers, item %+v; want %v, 1 layer, %d remaining of cost 1", i, res.Outcome, res.Layers(), res.Item(0), want, max(1-i, 0))
		}
		p.Release(res)
	}
	if d := local.Classes().Class("a").Check(p.LayerKey("user:u", "has"), 1); d.Allowed {
		t.Errorf("limit a after two requests of two: %+v, want full", d)
	}
	res := p.Decide(t.Context(), testReq{tok: "u"}, 1, 1)
	defer p.Release(res)
	if res.Outcome != OutcomeErrorDenied || !errors.Is(res.Err, ErrUnknownLimit) || res.Layers() != 0 {
		t.Errorf("group lacks: %v, %v, %d layers; want %v, ErrUnknownLimit, none decided", res.Outcome, res.Err, res.Layers(), OutcomeErrorDenied)
	}
}
