package backend

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPatient: patient keeps a context without a deadline as it is; of
// one with a deadline it keeps the values and Done, drops the deadline,
// and says context.Canceled once the parent is done, whether it was
// cancelled or its deadline passed; a context derived from it ends with
// it. It allocates once at most.
func TestPatient(t *testing.T) {
	type key struct{}
	bg := context.WithValue(context.Background(), key{}, "v")
	if patient(bg) != bg {
		t.Fatal("a context without a deadline was wrapped")
	}
	for _, ended := range []string{"cancelled", "past its deadline"} {
		parent, cancel := context.WithDeadline(bg, time.Now().Add(time.Hour))
		if ended != "cancelled" {
			parent, cancel = context.WithDeadline(bg, time.Now().Add(-time.Second))
		}
		p := patient(parent)
		if _, ok := p.Deadline(); ok {
			t.Fatalf("%s: the deadline was kept", ended)
		}
		if p.Value(key{}) != "v" {
			t.Fatalf("%s: the values were lost", ended)
		}
		child, stop := context.WithTimeout(p, time.Hour)
		if ended == "cancelled" {
			if p.Err() != nil || child.Err() != nil {
				t.Fatalf("before the parent ended: %v, %v", p.Err(), child.Err())
			}
			cancel()
		}
		<-p.Done()
		<-child.Done()
		if !errors.Is(p.Err(), context.Canceled) || child.Err() == nil {
			t.Fatalf("%s: Err %v (want Canceled), a derived context's %v", ended, p.Err(), child.Err())
		}
		stop()
		cancel()
	}
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if n := testing.AllocsPerRun(100, func() { _ = patient(parent).Err() }); n > 1 {
		t.Fatalf("patient: %v allocations, want at most 1", n)
	}
}
