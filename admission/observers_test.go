package admission_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

type countingObserver struct{ n int }

func (o *countingObserver) Observe(context.Context, *admission.Event) { o.n++ }

func observersConfig(obs []admission.Observer) admission.Config[string] {
	return admission.Config[string]{
		Limits:    map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
		Groups:    []admission.Group[string]{{Name: "g", Limit: "l"}},
		Key:       func(dst []byte, r string) ([]byte, error) { return admission.AppendID(dst, "usr", r), nil },
		Backend:   admission.LocalBackend(hotlimit.WithClock(hotlimit.NewManualClock()), hotlimit.WithSweepInterval(0)),
		Observers: obs,
	}
}

// TestObserversChecked: a nil Observer is a configuration error, not a
// panic on the first request; and the pipeline keeps its own copy of
// Config.Observers, so a caller reusing its slice changes nothing.
func TestObserversChecked(t *testing.T) {
	for _, obs := range [][]admission.Observer{{nil}, {&countingObserver{}, nil}} {
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
