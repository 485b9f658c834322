package backend

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// TestAddLimit: a limit AddLimit added decides beside the running set,
// keeps its state when Update and Reload replace the set, and is one
// limit across replicas on one Redis (exactly its capacity in total);
// adding it again is nothing, another policy under its name, a name of
// the set, past MaxAdded, or after Close are errors.
func TestAddLimit(t *testing.T) {
	stores := map[string][]*Store{"local": {open(t, Options{Kind: Local}, map[string]hotlimit.Policy{"a": frozen(5)})}}
	if os.Getenv(redistest.AddrEnv) != "" || inCI() { // else the Redis stores are left out, not the test
		for name, o := range servers(t, Redis) {
			stores[name] = []*Store{open(t, o, map[string]hotlimit.Policy{"a": frozen(5)}), open(t, o, map[string]hotlimit.Policy{"a": frozen(5)})}
		}
	}
	for name, ss := range stores {
		t.Run(name, func(t *testing.T) {
			for _, s := range ss {
				for range 2 {
					if err := s.AddLimit("added", frozen(4)); err != nil {
						t.Fatal(err)
					}
				}
			}
			ask := func(s *Store) bool {
				t.Helper()
				d, err := s.Allow(context.Background(), []admission.Layer{{Limit: "a", Key: "k", Cost: 1}, {Limit: "added", Key: "k", Cost: 1}})
				if err != nil {
					t.Fatal(err)
				}
				return d.Allowed
			}
			ok := 0
			for i := range 6 {
				if ask(ss[i%len(ss)]) {
					ok++
				}
				if i == 1 {
					// The set replaced, and reloaded: the added limit stays.
					for _, s := range ss {
						if err := s.Update(map[string]hotlimit.Policy{"a": frozen(5), "b": frozen(1)}); err != nil {
							t.Fatal(err)
						}
						if err := s.Reload(map[string]hotlimit.Policy{"a": frozen(5)}, func() {}); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if ok != 4 {
				t.Fatalf("%d admitted across %d replicas, want the added limit's 4", ok, len(ss))
			}
			s := ss[0]
			if err := s.AddLimit("added", frozen(9)); err == nil || !strings.Contains(err.Error(), "another policy") {
				t.Errorf("another policy: %v", err)
			}
			if err := s.AddLimit("a", frozen(5)); err == nil || !strings.Contains(err.Error(), "configuration's") {
				t.Errorf("a name of the set: %v", err)
			}
		})
	}
	s := stores["local"][0]
	for i := len(s.added.Load().policies); i < MaxAdded; i++ {
		if err := s.AddLimit("n"+string(rune('A'+i%26))+string(rune('A'+i/26)), frozen(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddLimit("one more", frozen(1)); !errors.Is(err, ErrTooManyLimits) {
		t.Errorf("past MaxAdded: %v", err)
	}
	s.Close()
	if err := s.AddLimit("after", frozen(1)); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}
