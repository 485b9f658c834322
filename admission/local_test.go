package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// testReq is a request of the pipeline tests: a token, a tenant and a
// cost.
type testReq struct {
	tok, tenant string
	cost        int64
}

// newLocal is the *Local LocalBackend(opts...) builds for limits.
func newLocal(limits map[string]hotlimit.Policy, opts ...hotlimit.Option) (*Local, error) {
	b, err := LocalBackend(opts...)(limits)
	l, _ := b.(*Local)
	return l, err
}

// byName hands a *Local each layer's limit name in bytes of its own, so
// that the Local finds its limiter by comparing the name's bytes, not
// the pointer a Pipeline's names share with the Local's.
type byName struct{ *Local }

func (b byName) AllowStates(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	own := make([]Layer, len(layers))
	for i, ly := range layers {
		own[i] = Layer{Limit: strings.Clone(ly.Limit), Key: ly.Key, Cost: ly.Cost}
	}
	return b.Local.AllowStates(ctx, own, states)
}

// testPipeline builds a pipeline of two groups (one sharing its limit
// with the global layer) and two identity layers over factory.
func testPipeline(t *testing.T, states bool, factory BackendFactory) *Pipeline[testReq] {
	t.Helper()
	p, err := New(Config[testReq]{
		Limits: map[string]hotlimit.Policy{
			"tok":    hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 6},
			"search": hotlimit.SlidingWindow{Limit: 9, Window: 10 * time.Second},
			"tenant": hotlimit.FixedWindow{Limit: 12, Window: 5 * time.Second},
			"ip":     hotlimit.SlidingLog{Limit: 7, Window: 3 * time.Second},
		},
		Groups: []Group[testReq]{
			{Name: "read", Limit: "tok"},
			{Name: "search", Limit: "search", Price: func(r testReq) (int64, error) { return r.cost, nil }},
		},
		Key:    func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "user", r.tok), nil },
		Global: "tok",
		Identities: []IdentityLayer[testReq]{
			{Limit: "tenant", Key: func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "tenant", r.tenant), nil }, Cost: 2},
			{Limit: "ip", Key: func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "net", "one"), nil }},
		},
		Backend: factory,
		States:  states,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestLocalByName: a Local finds each layer's limiter by its name's
// bytes, not only by the pointer a Pipeline's names share with it: over
// a Local handed names of their own, every request of a random sequence
// (costs above a capacity included) gets the same outcome, decision,
// binding layer and items as over a Local handed the Pipeline's.
func TestLocalByName(t *testing.T) {
	for _, states := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(5, 6))
		var pipes [2]*Pipeline[testReq]
		var clocks [2]*hotlimit.ManualClock
		for i := range pipes {
			clock := hotlimit.NewManualClock()
			clocks[i] = clock
			pipes[i] = testPipeline(t, states, func(limits map[string]hotlimit.Policy) (Backend, error) {
				l, err := newLocal(limits, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
				if i == 1 && err == nil {
					return byName{l}, nil
				}
				return l, err
			})
		}
		for step := range 2000 {
			d := time.Duration(rng.Int64N(int64(400 * time.Millisecond)))
			clocks[0].Advance(d)
			clocks[1].Advance(d)
			r := testReq{tok: []string{"a", "b"}[rng.IntN(2)], tenant: []string{"x", "y"}[rng.IntN(2)], cost: rng.Int64N(11)}
			gi := rng.IntN(2)
			var got [2]*Result
			for i, p := range pipes {
				got[i] = p.Decide(t.Context(), r, gi, 1)
			}
			a, b := got[0], got[1]
			if a.Outcome != b.Outcome || a.Decision != b.Decision || a.Binding != b.Binding || a.Layers() != b.Layers() || a.Item(0).Known != b.Item(0).Known {
				t.Fatalf("step %d (states %v): resolved %v %+v binding %d, by name %v %+v binding %d", step, states, a.Outcome, a.Decision, a.Binding, b.Outcome, b.Decision, b.Binding)
			}
			if a.Layers() != 4 {
				t.Fatalf("step %d: %d layers, want 4", step, a.Layers())
			}
			for i := range a.Layers() {
				if ia, ib := a.Item(i), b.Item(i); ia != ib {
					t.Fatalf("step %d (states %v): item %d resolved %+v, by name %+v", step, states, i, ia, ib)
				}
			}
			for i, p := range pipes {
				p.Release(got[i])
			}
		}
	}
}

// TestLocalMissingLimit: a BackendFactory may return a Local built from
// other limits than Config.Limits; the pipeline then asks it by name, and
// a layer whose limit it lacks fails as a backend error naming
// ErrUnknownLimit, not as a layer without a limiter.
func TestLocalMissingLimit(t *testing.T) {
	p := testPipeline(t, true, func(map[string]hotlimit.Policy) (Backend, error) {
		return newLocal(map[string]hotlimit.Policy{
			"tok":    hotlimit.TokenBucket{Rate: hotlimit.PerSecond(3), Burst: 6},
			"tenant": hotlimit.FixedWindow{Limit: 12, Window: 5 * time.Second},
			"ip":     hotlimit.SlidingLog{Limit: 7, Window: 3 * time.Second},
		})
	})
	res := p.Decide(t.Context(), testReq{tok: "a", tenant: "x", cost: 1}, 1, 1)
	defer p.Release(res)
	if res.Outcome != OutcomeErrorDenied || !errors.Is(res.Err, ErrUnknownLimit) {
		t.Fatalf("outcome %v, err %v; want %v wrapping ErrUnknownLimit", res.Outcome, res.Err, OutcomeErrorDenied)
	}
}

// TestLocalManyLimits: a Local of more limits than it scans finds each
// by name all the same, for a decision and a Reset, and refuses a name
// it does not hold.
func TestLocalManyLimits(t *testing.T) {
	limits := map[string]hotlimit.Policy{}
	for i := range scanLimits + 4 {
		limits["l"+strconv.Itoa(i)] = hotlimit.FixedWindow{Limit: int64(i + 1), Window: time.Hour}
	}
	b, err := newLocal(limits, hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := t.Context()
	for i := range scanLimits + 4 {
		name := strings.Clone("l" + strconv.Itoa(i))
		states := make([]hotlimit.LayerState, 1)
		d, idx, err := b.AllowStates(ctx, []Layer{{Limit: name, Key: "k", Cost: 1}}, states)
		if err != nil || !d.Allowed || idx != 0 || d.Limit != int64(i+1) || states[0].Decision.Remaining != int64(i) {
			t.Fatalf("%s: %+v %d %v, state %+v; want admitted by its own limit of %d", name, d, idx, err, states[0], i+1)
		}
		if err := b.Reset(ctx, name, "k"); err != nil {
			t.Fatal(err)
		}
		if d := b.Classes().Class(name).Check("k", 0); d.Remaining != d.Limit {
			t.Fatalf("%s after Reset: %+v", name, d)
		}
	}
	if _, _, err := b.AllowStates(ctx, []Layer{{Limit: "nope", Key: "k", Cost: 1}}, nil); !errors.Is(err, ErrUnknownLimit) {
		t.Fatalf("unknown limit: %v", err)
	}
	if err := b.Reset(ctx, "nope", "k"); !errors.Is(err, ErrUnknownLimit) {
		t.Fatalf("Reset of an unknown limit: %v", err)
	}
}
