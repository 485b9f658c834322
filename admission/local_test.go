package admission

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

// testReq is a request of the pipeline tests: a token, a tenant and a
// cost.
type testReq struct {
	tok, tenant string
	cost        int64
}

// byName hides a *Local behind the StateBackend interface, so that a
// Pipeline asks it by limit name instead of through its resolved
// limiters.
type byName struct{ l *Local }

func (b byName) Allow(ctx context.Context, layers []Layer) (hotlimit.Decision, error) {
	return b.l.Allow(ctx, layers)
}

func (b byName) AllowBinding(ctx context.Context, layers []Layer) (hotlimit.Decision, int, error) {
	return b.l.AllowBinding(ctx, layers)
}

func (b byName) AllowStates(ctx context.Context, layers []Layer, states []LayerState) (hotlimit.Decision, int, error) {
	return b.l.AllowStates(ctx, layers, states)
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
		Key:    func(dst []byte, r testReq) ([]byte, error) { return AppendID(dst, "user", r.tok), nil },
		Global: "tok",
		Identities: []IdentityLayer[testReq]{
			{Limit: "tenant", Key: func(dst []byte, r testReq) ([]byte, error) { return AppendID(dst, "tenant", r.tenant), nil }, Cost: 2},
			{Limit: "ip", Key: func(dst []byte, r testReq) ([]byte, error) { return AppendID(dst, "net", "one"), nil }},
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

// TestLocalResolved: a Pipeline over a Local hands each layer to the
// limiter it resolved once; over the same Local asked by name, every
// request of a random sequence (costs above a capacity included) gets the
// same outcome, decision, binding layer and items.
func TestLocalResolved(t *testing.T) {
	for _, states := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(5, 6))
		var pipes [2]*Pipeline[testReq]
		var clocks [2]*hotlimit.ManualClock
		for i := range pipes {
			clock := hotlimit.NewManualClock()
			clocks[i] = clock
			pipes[i] = testPipeline(t, states, func(limits map[string]hotlimit.Policy) (Backend, error) {
				l, err := NewLocal(limits, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
				if i == 1 && err == nil {
					return byName{l}, nil
				}
				return l, err
			})
		}
		if pipes[0].local == nil || pipes[1].local != nil {
			t.Fatal("the first pipeline does not resolve its limiters, or the second does")
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
			if a.Outcome != b.Outcome || a.Decision != b.Decision || a.Binding != b.Binding || a.Layers() != b.Layers() || a.States() != b.States() {
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
		return NewLocal(map[string]hotlimit.Policy{
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
