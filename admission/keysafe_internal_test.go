package admission

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/internal/ident"
)

// copier hands a Local each layer's key as a string of its own: a Backend
// that is not a *Local, so that the Pipeline gives it copies of "rl:v1:"
// keys, never views of a pooled Result's buffer. It is the reference the
// views are checked against.
type copier struct{ *Local }

func (b copier) AllowStates(ctx context.Context, layers []Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	own := make([]Layer, len(layers))
	for i, ly := range layers {
		own[i] = Layer{Limit: ly.Limit, Key: strings.Clone(ly.Key), Cost: ly.Cost}
	}
	return b.Local.AllowStates(ctx, own, states)
}

// safeLimits are one limit of every algorithm, each with room for a few
// requests, so that each binds in turn.
var safeLimits = map[string]hotlimit.Policy{
	"tb": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 3},
	"lb": hotlimit.LeakyBucket{Rate: hotlimit.PerMinute(40), Capacity: 2},
	"fw": hotlimit.FixedWindow{Limit: 4, Window: 10 * time.Second},
	"sw": hotlimit.SlidingWindow{Limit: 15, Window: 10 * time.Second},
	"sl": hotlimit.SlidingLog{Limit: 6, Window: 4 * time.Second},
}

// safePipeline limits a testReq by its token (longer than the 15-byte
// inline slot) in group "a" (fixed window) or "search" (sliding log,
// priced), globally by a token bucket, and by identity layers keyed by
// its tenant (sliding window) and token (leaky bucket), over a Local on
// clock (wrapped in a copier when copied).
func safePipeline(t *testing.T, clock hotlimit.Clock, copied bool) (*Pipeline[testReq], *Local) {
	t.Helper()
	local, err := newLocal(safeLimits, hotlimit.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	var backend Backend = local
	if copied {
		backend = copier{local}
	}
	cfg := Config[testReq]{
		Limits: safeLimits,
		Groups: []Group[testReq]{
			{Name: "a", Limit: "fw"},
			{Name: "search", Limit: "sl", Price: func(r testReq) (int64, error) { return r.cost, nil }},
		},
		Key:    func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "user", r.tok), nil },
		Global: "tb",
		Identities: []IdentityLayer[testReq]{
			{Limit: "sw", Key: func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "tenant", r.tenant), nil }},
			{Limit: "lb", Key: func(dst []byte, r testReq) ([]byte, error) { return ident.AppendKindID(dst, "user", r.tok), nil }},
		},
		Backend: func(map[string]hotlimit.Policy) (Backend, error) { return backend, nil },
		States:  true,
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, isLocal := p.Backend().(*Local); isLocal == copied {
		t.Fatalf("copied=%v: backend %T", copied, p.Backend())
	}
	return p, local
}

// safeToken is identity i's token: 40 bytes, the same length for every
// i, differing from the others' in bytes at both ends and the middle.
func safeToken(i int) string {
	s := fmt.Sprintf("%02x", i)
	return s + strings.Repeat("k", 17) + s + strings.Repeat("v", 17) + s
}

// outcome is what a test reads of a Result: all of it but its keys.
func outcome(p *Pipeline[testReq], res *Result) string {
	s := fmt.Sprintf("%v/%v/%+v/%d/%d", res.Outcome, res.Refusal, res.Decision, res.Binding, res.Layers())
	for i := range res.Layers() {
		it := res.Item(i)
		s += fmt.Sprintf(" %s:%d", it.Name, it.Remaining)
	}
	return s
}

// TestPooledKeysNotRetained: a Local is handed views of a pooled
// Result's buffer, which the next request overwrites. Nothing keeps
// them: a random sequence of requests by identities with long keys of
// one length (through every algorithm, costs above a capacity included),
// each Result released before the next Decide reuses it, interleaved with
// Reset, Check, SetPolicy, Sweep and clock steps, gets the same outcome
// and layer states over a Local as over one handed copies of every key,
// and every identity's state in each limiter reads the same (Check) at
// the end.
func TestPooledKeysNotRetained(t *testing.T) {
	cv, cc := hotlimit.NewManualClock(), hotlimit.NewManualClock()
	p, pl := safePipeline(t, cv, false)
	q, ql := safePipeline(t, cc, true)
	ctx := context.Background()
	const ids = 6
	rng := rand.New(rand.NewPCG(3, 7))
	check := func(step int) {
		t.Helper()
		for i := range ids {
			tok := string(ident.AppendKindID(nil, "user", safeToken(i)))
			for _, gl := range [][2]string{{"a", "fw"}, {"search", "sl"}, {"", "tb"}, {"", "lb"}} {
				dv := pl.limiter(gl[1]).Check(p.LayerKey(tok, gl[0]), 1)
				dc := ql.limiter(gl[1]).Check(q.LayerKey(tok, gl[0]), 1)
				if dv != dc {
					t.Fatalf("step %d: identity %d, limit %s: Check %+v over views, %+v over copies", step, i, gl[1], dv, dc)
				}
			}
		}
	}
	emptied := map[string]int{} // layers left empty, by limit
	for step := range 4000 {
		switch n := rng.IntN(100); {
		case n < 2:
			tok := string(ident.AppendKindID(nil, "user", safeToken(rng.IntN(ids))))
			if err := p.Reset(ctx, tok); err != nil {
				t.Fatal(err)
			}
			if err := q.Reset(ctx, tok); err != nil {
				t.Fatal(err)
			}
		case n < 4:
			check(step)
		case n < 5:
			fw := hotlimit.FixedWindow{Limit: int64(3 + rng.IntN(4)), Window: 10 * time.Second}
			if err := pl.Classes().SetPolicy("fw", fw); err != nil {
				t.Fatal(err)
			}
			if err := ql.Classes().SetPolicy("fw", fw); err != nil {
				t.Fatal(err)
			}
		case n < 6:
			for _, name := range []string{"tb", "lb", "fw", "sw", "sl"} {
				if a, b := pl.limiter(name).Sweep(), ql.limiter(name).Sweep(); a != b {
					t.Fatalf("step %d: Sweep of %s removed %d keys over views, %d over copies", step, name, a, b)
				}
			}
		case n < 12:
			d := time.Duration(rng.IntN(3000)) * time.Millisecond
			cv.Advance(d)
			cc.Advance(d)
		default:
			i := rng.IntN(ids)
			r := testReq{tok: safeToken(i), tenant: safeToken(i % 3), cost: int64(1 + rng.IntN(7))}
			group := rng.IntN(2)
			rv, rc := p.Decide(ctx, r, group, 1), q.Decide(ctx, r, group, 1)
			for j := range rv.Layers() {
				if it := rv.Item(j); it.Remaining == 0 {
					emptied[it.Name]++
				}
			}
			if ov, oc := outcome(p, rv), outcome(q, rc); ov != oc {
				t.Fatalf("step %d: identity %d group %d: %s over views, %s over copies", step, i, group, ov, oc)
			}
			p.Release(rv)
			q.Release(rc)
		}
	}
	check(-1)
	for name := range safeLimits {
		if emptied[name] == 0 {
			t.Errorf("no request left %s empty: %v", name, emptied)
		}
	}
	for _, name := range []string{"tb", "lb", "fw", "sw", "sl"} {
		if a, b := pl.limiter(name).Len(), ql.limiter(name).Len(); a != b {
			t.Errorf("limiter %s holds %d keys over views, %d over copies", name, a, b)
		}
	}
}

// TestPooledKeysConcurrent: goroutines deciding through one Pipeline over
// a Local, each for an identity of its own (keys of one length), with
// time frozen, each get exactly the admissions one identity gets alone
// over a Local handed copies, and each identity's state reads as that
// lone identity's at the end: no request's pooled keys were read as
// another's.
func TestPooledKeysConcurrent(t *testing.T) {
	const workers, requests = 8, 40
	ctx := context.Background()
	q, ql := safePipeline(t, hotlimit.NewManualClock(), true)
	want, wantCheck := 0, hotlimit.Decision{}
	for n := range requests {
		res := q.Decide(ctx, testReq{tok: safeToken(99), tenant: safeToken(99)}, n%2, 1)
		if res.Outcome == OutcomeAllowed {
			want++
		}
		q.Release(res)
	}
	wantCheck = ql.limiter("fw").Check(q.LayerKey(string(ident.AppendKindID(nil, "user", safeToken(99))), "a"), 1)
	if want == 0 || want == requests {
		t.Fatalf("the lone identity got %d admissions of %d: the limits do not bind", want, requests)
	}
	p, pl := safePipeline(t, hotlimit.NewManualClock(), false)
	got := make([]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := testReq{tok: safeToken(w), tenant: safeToken(w)}
			for n := range requests {
				res := p.Decide(ctx, r, n%2, 1)
				if res.Outcome == OutcomeAllowed {
					got[w]++
				}
				p.Release(res)
			}
		}()
	}
	wg.Wait()
	for w := range workers {
		if got[w] != want {
			t.Errorf("identity %d: %d admissions, want %d", w, got[w], want)
		}
		tok := string(ident.AppendKindID(nil, "user", safeToken(w)))
		if d := pl.limiter("fw").Check(p.LayerKey(tok, "a"), 1); d != wantCheck {
			t.Errorf("identity %d: Check %+v, want %+v", w, d, wantCheck)
		}
	}
}

// keptEvents is an Observer that keeps a copy of each Event it is
// handed (its Result dropped, as ev must not be kept), and a clone of
// its strings taken then.
type keptEvents struct {
	evs    []Event
	clones [][5]string
}

func (*keptEvents) Begin(ctx context.Context, _ *Event) context.Context { return ctx }
func (k *keptEvents) Observe(_ context.Context, ev *Event) {
	e := *ev
	e.Result, e.Context = nil, nil
	k.evs = append(k.evs, e)
	k.clones = append(k.clones, eventStrings(e, true))
}

// eventStrings are ev's strings, cloned when clone is set.
func eventStrings(ev Event, clone bool) [5]string {
	s := [5]string{ev.Group, ev.GroupLimit, ev.IdentityKind, ev.Limit, ev.Missing}
	if clone {
		for i := range s {
			s[i] = strings.Clone(s[i])
		}
	}
	return s
}

// TestObserverEventsKept: the strings of an Event an Observer copied
// (its group, limits and identity kind) are not views of
// the pooled Result: read after many requests of other identities and
// kinds reused it, they still say what they said when observed.
func TestObserverEventsKept(t *testing.T) {
	obs := &keptEvents{}
	kinds := []string{"user", "tenant", "app", "svc"}
	p, err := New(Config[testReq]{
		Limits: safeLimits,
		Groups: []Group[testReq]{{Name: "a", Limit: "fw"}, {Name: "search", Limit: "sl"}},
		Key: func(dst []byte, r testReq) ([]byte, error) {
			return ident.AppendKindID(dst, r.tenant, r.tok), nil
		},
		Global:    "tb",
		Identify:  true,
		Observers: []Observer{obs},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	for n := range 200 {
		r := testReq{tok: safeToken(n % 7), tenant: kinds[n%len(kinds)]}
		p.Release(p.Decide(ctx, r, n%2, 1))
	}
	kinded := 0
	for i, ev := range obs.evs {
		if ev.IdentityKind != "" && ev.Limit != "" {
			kinded++
		}
		if got := eventStrings(ev, false); got != obs.clones[i] {
			t.Fatalf("event %d reads %q, observed %q", i, got, obs.clones[i])
		}
	}
	if kinded == 0 {
		t.Fatal("no event with a kind and a limit: the test reads none")
	}
}

// TestReleaseClearsGrownKeys: keys too long for a Result's buffer are a
// copy of their own, which Release clears from the pooled Result's
// layers, a Local's as any other backend's, so that the pool keeps no
// request's key alive.
func TestReleaseClearsGrownKeys(t *testing.T) {
	long := strings.Repeat("t", maxKeyBuf+40)
	for _, copied := range []bool{false, true} {
		local, err := newLocal(safeLimits, hotlimit.WithClock(hotlimit.NewManualClock()))
		if err != nil {
			t.Fatal(err)
		}
		var backend Backend = local
		if copied {
			backend = copier{local}
		}
		p, err := New(Config[testReq]{
			Limits:  safeLimits,
			Groups:  []Group[testReq]{{Name: "a", Limit: "fw"}},
			Key:     func(dst []byte, r testReq) ([]byte, error) { return append(dst, r.tok...), nil }, // not hashed: too long for the buffer
			Global:  "tb",
			Backend: func(map[string]hotlimit.Policy) (Backend, error) { return backend, nil },
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		res := p.Decide(t.Context(), testReq{tok: long}, 0, 1)
		if res.Outcome != OutcomeAllowed || res.Layers() != 2 || res.ownKeys {
			t.Fatalf("copied %v: %v %v, %d layers, own keys %v; want allowed, 2 layers in a grown buffer", copied, res.Outcome, res.Err, res.Layers(), res.ownKeys)
		}
		p.Release(res)
		for i := range maxLayers {
			if res.layers[i] != (Layer{}) {
				t.Errorf("copied %v: layer %d after Release holds a key of %d bytes; want cleared", copied, i, len(res.layers[i].Key))
			}
		}
	}
}
