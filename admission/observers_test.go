package admission_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/ident"
)

type countingObserver struct{ n int }

func (o *countingObserver) Begin(ctx context.Context, _ *admission.Event) context.Context { return ctx }

func (o *countingObserver) Observe(context.Context, *admission.Event) { o.n++ }

// ctxKey marks the contexts TestObserverBegin's observers return.
type ctxKey struct{}

// beginObserver returns from Begin a context marked with its name, after
// the mark of the observer before it, and records what it saw.
type beginObserver struct {
	name          string
	began, layers int
	seen          []string // the marks of the contexts Observe got
}

func (o *beginObserver) Begin(ctx context.Context, ev *admission.Event) context.Context {
	o.began++
	o.layers = ev.Result.Layers()
	prev, _ := ctx.Value(ctxKey{}).(string)
	return context.WithValue(ctx, ctxKey{}, prev+o.name)
}

func (o *beginObserver) Observe(ctx context.Context, ev *admission.Event) {
	mark, _ := ctx.Value(ctxKey{}).(string)
	o.seen = append(o.seen, mark+"/"+ev.Result.Outcome.String())
}

// ctxBackend records the mark of the context each decision is made
// under.
type ctxBackend struct {
	*admission.Local
	marks []string
}

func (b *ctxBackend) AllowStates(ctx context.Context, layers []admission.Layer, states []hotlimit.LayerState) (hotlimit.Decision, int, error) {
	mark, _ := ctx.Value(ctxKey{}).(string)
	b.marks = append(b.marks, mark)
	return b.Local.AllowStates(ctx, layers, states)
}

// TestObserverBegin: every observer's Begin runs before the backend, in
// Config.Observers order, with the request's layers known, each given
// the context the one before returned; the backend decides under the
// last one, and Observe gets it too. A request that never reaches the
// backend (an exempt identity) begins nothing.
func TestObserverBegin(t *testing.T) {
	a, b := &beginObserver{name: "a"}, &beginObserver{name: "b"}
	var be *ctxBackend
	cfg := observersConfig([]admission.Observer{a, b})
	cfg.Global = "l"
	cfg.ExemptIdentities = []string{"usr:root"}
	cfg.Backend = func(limits map[string]hotlimit.Policy) (admission.Backend, error) {
		b, err := admission.LocalBackend(hotlimit.WithSweepInterval(0))(limits)
		l, _ := b.(*admission.Local)
		be = &ctxBackend{Local: l}
		return be, err
	}
	p, err := admission.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, id := range []string{"ann", "root"} {
		p.Release(p.Decide(t.Context(), id, 0, 1))
	}
	if a.began != 1 || b.began != 1 || a.layers != 2 || b.layers != 2 {
		t.Fatalf("Begin called %d and %d times, with %d and %d layers; want once each, with 2", a.began, b.began, a.layers, b.layers)
	}
	if len(be.marks) != 1 || be.marks[0] != "ab" {
		t.Fatalf("the backend decided under %q; want [\"ab\"] (b's Begin given a's context)", be.marks)
	}
	for _, o := range []*beginObserver{a, b} {
		if len(o.seen) != 1 || o.seen[0] != "ab/allowed" {
			t.Errorf("observer %s's Observe saw %q; want [\"ab/allowed\"]", o.name, o.seen)
		}
	}
}

// TestTypedNilBackend: a BackendFactory returning a nil pointer of a
// Backend type (a Local or another) with no error is a configuration
// error naming the type, not a panic on the first request.
func TestTypedNilBackend(t *testing.T) {
	for _, b := range []admission.Backend{(*admission.Local)(nil), (*ctxBackend)(nil)} {
		cfg := observersConfig(nil)
		cfg.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return b, nil }
		p, err := admission.New(cfg)
		if err == nil {
			p.Close()
			t.Fatalf("New accepted a %T Backend", b)
		}
		if want := fmt.Sprintf("admission: Config.Backend returned a nil %T", b); !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want it to contain %q", err, want)
		}
	}
}

func observersConfig(obs []admission.Observer) admission.Config[string] {
	return admission.Config[string]{
		Limits:    map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		Groups:    []admission.Group[string]{{Name: "g", Limit: "l"}},
		Key:       func(dst []byte, r string) ([]byte, error) { return ident.AppendKindID(dst, "usr", r), nil },
		Backend:   admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0)),
		Observers: obs,
	}
}

// TestObserversChecked: a nil Observer, or a nil pointer of an Observer
// type, is a configuration error, not a panic on the first request; and
// the pipeline keeps its own copy of Config.Observers, so a caller
// reusing its slice changes nothing.
func TestObserversChecked(t *testing.T) {
	for _, obs := range [][]admission.Observer{{nil}, {&countingObserver{}, nil}, {(*countingObserver)(nil)}} {
		p, err := admission.New(observersConfig(obs))
		if err == nil {
			p.Close()
			t.Fatalf("New accepted Observers %v", obs)
		}
		if !strings.Contains(err.Error(), "Config.Observers[") {
			t.Errorf("error %q does not name Config.Observers[i]", err)
		}
	}
	o := &countingObserver{}
	obs := []admission.Observer{o}
	p, err := admission.New(observersConfig(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	obs[0] = nil // the caller's slice, reused
	p.Release(p.Decide(context.Background(), "u1", 0, 1))
	if o.n != 1 {
		t.Fatalf("the observer saw %d decisions, want 1", o.n)
	}
}
