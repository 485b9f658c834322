package backend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/admission"
)

// admits decides n calls of layers on s and returns how many were
// admitted; an error fails the test.
func admits(t *testing.T, s *Store, n int, layers ...admission.Layer) int {
	t.Helper()
	got := 0
	for range n {
		d, _, err := s.AllowStates(context.Background(), layers, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			got++
		}
	}
	return got
}

// TestUpdateKeepsState: a limit whose name an Update keeps keeps its
// keys' state; a dropped limit is unknown, and starts fresh when it comes
// back; a new limit starts fresh.
func TestUpdateKeepsState(t *testing.T) {
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(5), "b": frozen(5)})
	a, b, c := admission.Layer{Limit: "a", Key: "k", Cost: 1}, admission.Layer{Limit: "b", Key: "k", Cost: 1}, admission.Layer{Limit: "c", Key: "k", Cost: 1}
	if got := admits(t, s, 3, a) + admits(t, s, 2, b); got != 5 {
		t.Fatalf("before the update: %d admitted; want 5", got)
	}
	if err := s.Update(map[string]hotlimit.Policy{"a": frozen(5), "c": frozen(2)}); err != nil {
		t.Fatal(err)
	}
	if got := admits(t, s, 5, a); got != 2 {
		t.Fatalf("a after the update: %d of 5 admitted; want its 2 left", got)
	}
	if got := admits(t, s, 5, c); got != 2 {
		t.Fatalf("new limit c: %d of 5 admitted; want 2 (fresh)", got)
	}
	if _, _, err := s.AllowStates(context.Background(), []admission.Layer{b}, nil); !errors.Is(err, admission.ErrUnknownLimit) {
		t.Fatalf("dropped limit b: %v; want ErrUnknownLimit", err)
	}
	if got := s.Names(); strings.Join(got, ",") != "a,c" {
		t.Fatalf("Names() = %v; want [a c]", got)
	}
	if err := s.Update(map[string]hotlimit.Policy{"a": frozen(5), "b": frozen(5)}); err != nil {
		t.Fatal(err)
	}
	if got := admits(t, s, 6, b); got != 5 {
		t.Fatalf("b back: %d of 6 admitted; want 5 (fresh)", got)
	}
	if got := admits(t, s, 1, a); got != 0 {
		t.Fatalf("a after two updates: %d admitted; want 0 (its state kept)", got)
	}
}

// TestUpdateRefused: an Update that changes a limit's policy under the
// same name, or gives an invalid policy, is refused with an error naming
// the limit, and the running set stays, state and all.
func TestUpdateRefused(t *testing.T) {
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(3)})
	a := admission.Layer{Limit: "a", Key: "k", Cost: 1}
	admits(t, s, 2, a)
	for _, limits := range []map[string]hotlimit.Policy{
		{"a": frozen(4)},
		{"a": frozen(3), "bad": hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1)}},
		{"a": frozen(3), "nil": nil},
	} {
		err := s.Update(limits)
		if err == nil {
			t.Fatalf("Update(%v) accepted", limits)
		}
		if !strings.Contains(err.Error(), `limit "`) {
			t.Fatalf("Update(%v): %v; want an error naming the limit", limits, err)
		}
	}
	if got := admits(t, s, 3, a); got != 1 {
		t.Fatalf("after refused updates: %d of 3 admitted; want the 1 left", got)
	}
}

// TestLocalExactUnderUpdates: concurrent decisions on one key while
// another goroutine keeps replacing the set of limits (a limit added and
// dropped beside it) admit exactly the key's limit: no Update resets it.
func TestLocalExactUnderUpdates(t *testing.T) {
	const limit = 300
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(limit)})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load() && i < 10000; i++ {
			limits := map[string]hotlimit.Policy{"a": frozen(limit)}
			if i%2 == 0 {
				limits["x"] = frozen(1)
			}
			if err := s.Update(limits); err != nil {
				t.Error(err)
				return
			}
		}
	})
	got := hammer(t, []*Store{s}, 4, 200, []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}, nil)
	stop.Store(true)
	wg.Wait()
	if got != limit {
		t.Fatalf("%d admitted under updates; want exactly %d", got, limit)
	}
}

// TestOneSetPerDecision: a decision in flight during an Update is decided
// entirely by one set of limits. The sets alternate between {a, b} and
// {a, c}, so a decision with layers of both b and c names, in any one
// set, a limit it does not hold, and must fail; one that took b from one
// set and c from the next would be decided. Decisions of one layer alone
// show that the updates did interleave with the decisions. (Limiters
// without a sweeper and of one shard make an Update cheap, so that many
// happen while decisions are in flight.) With each layer looked up in
// whichever set is current at that layer, it failed 4 runs of 4, and 1
// of 4 under -race.
func TestOneSetPerDecision(t *testing.T) {
	// Long names make each layer's lookup slow (hashing 1 KiB), so
	// that an Update can land between a decision's two lookups.
	long := strings.Repeat("x", 1<<10)
	b, c := "b"+long, "c"+long
	ab := map[string]hotlimit.Policy{"a": frozen(1), b: frozen(20000)}
	ac := map[string]hotlimit.Policy{"a": frozen(1), c: frozen(20000)}
	s := open(t, Options{LocalOptions: []hotlimit.Option{hotlimit.WithShards(1), hotlimit.WithSweepInterval(0)}}, ab)
	var done atomic.Bool
	var updater sync.WaitGroup
	updater.Go(func() {
		for i := 0; !done.Load(); i++ {
			if err := s.Update([]map[string]hotlimit.Policy{ac, ab}[i%2]); err != nil {
				t.Error(err)
				return
			}
		}
	})
	layers := []admission.Layer{{Limit: b, Key: "k", Cost: 1}, {Limit: c, Key: "k", Cost: 1}}
	var mixed, one, tries atomic.Int64
	var workers sync.WaitGroup
	for w := range 2 {
		workers.Go(func() {
			ls := slices.Clone(layers)
			if w == 1 {
				slices.Reverse(ls)
			}
			for range 3000 {
				tries.Add(1)
				if _, _, err := s.AllowStates(context.Background(), ls, nil); err == nil {
					mixed.Add(1)
				}
				if _, _, err := s.AllowStates(context.Background(), ls[:1], nil); err == nil {
					one.Add(1)
				}
			}
		})
	}
	workers.Wait()
	done.Store(true)
	updater.Wait()
	if n := mixed.Load(); n > 0 {
		t.Fatalf("%d of %d decisions of layers b and c were decided: each mixed two sets of limits", n, tries.Load())
	}
	if n := one.Load(); n == 0 || n == tries.Load() {
		t.Fatalf("a single layer was decided %d times of %d: the updates did not interleave with the decisions", n, tries.Load())
	}
}

// TestLocalStates: each layer's state comes from its own decision; a
// states of another length than the layers gets what it has room for,
// and Remaining -1 beyond the layers; a refused call takes nothing.
func TestLocalStates(t *testing.T) {
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(3), "b": frozen(10)})
	for _, n := range []int{0, 1, 2, 5} {
		key := fmt.Sprint("k", n)
		layers := []admission.Layer{{Limit: "a", Key: key, Cost: 2}, {Limit: "b", Key: key, Cost: 1}}
		states := make([]hotlimit.LayerState, n)
		for i := range states {
			states[i].Decision.Remaining = 77
		}
		d, i, err := s.AllowStates(context.Background(), layers, states)
		if err != nil || !d.Allowed || i != 0 {
			t.Fatalf("%d states: %+v, binding %d, %v; want admitted, a binding", n, d, i, err)
		}
		want := []int64{1, 9, -1, -1, -1}
		for j := range states {
			if states[j].Decision.Remaining != want[j] {
				t.Fatalf("%d states: states[%d] = %+v; want Remaining %d", n, j, states[j], want[j])
			}
		}
		if n > 0 && (states[0].Policy.Limit != 3 || states[0].Next <= 0) {
			t.Fatalf("states[0] = %+v; want the policy's limit 3 and a wait", states[0])
		}
	}
	// Refused by a (1 left, cost 2): b keeps its 9.
	states := make([]hotlimit.LayerState, 2)
	layers := []admission.Layer{{Limit: "a", Key: "k1", Cost: 2}, {Limit: "b", Key: "k1", Cost: 1}}
	d, i, err := s.AllowStates(context.Background(), layers, states)
	if err != nil || d.Allowed || i != 0 || states[0].Decision.Remaining != 1 || states[1].Decision.Remaining != 9 {
		t.Fatalf("refused call: %+v, binding %d, %v, states %+v; want refused by a, b at 9", d, i, err, states)
	}
}

// TestLocalZeroAllocs: a decision of three layers on keys the store
// holds, with states, allocates nothing.
func TestLocalZeroAllocs(t *testing.T) {
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(20000), "b": frozen(20000), "c": frozen(20000)})
	layers := []admission.Layer{{Limit: "a", Key: "k", Cost: 1}, {Limit: "b", Key: "k", Cost: 1}, {Limit: "c", Key: "j", Cost: 1}}
	states := make([]hotlimit.LayerState, len(layers))
	ctx := context.Background()
	s.AllowStates(ctx, layers, states)
	if n := testing.AllocsPerRun(1000, func() { s.AllowStates(ctx, layers, states) }); n != 0 {
		t.Fatalf("%v allocations per decision; want 0", n)
	}
}

// TestClosed: after Close, decisions and Updates fail with ErrClosed,
// and a second Close does nothing.
func TestClosed(t *testing.T) {
	s, err := Open(context.Background(), Options{Kind: Local}, map[string]hotlimit.Policy{"a": frozen(1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allow(context.Background(), []admission.Layer{{Limit: "a", Key: "k", Cost: 1}}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Allow after Close: %v; want ErrClosed", err)
	}
	if err := s.Update(map[string]hotlimit.Policy{"a": frozen(1)}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Update after Close: %v; want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReload: during Reload's publish both the old and the new limits
// decide (a request may have read either configuration); a limit kept or
// added keeps what it consumed then; afterwards the dropped limit is
// unknown. A refused Reload does not publish and keeps the running set.
func TestReload(t *testing.T) {
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(3), "b": frozen(3)})
	a, b, c := admission.Layer{Limit: "a", Key: "k", Cost: 1}, admission.Layer{Limit: "b", Key: "k", Cost: 1}, admission.Layer{Limit: "c", Key: "k", Cost: 1}
	admits(t, s, 1, b)
	published := 0
	err := s.Reload(map[string]hotlimit.Policy{"b": frozen(3), "c": frozen(3)}, func() {
		published++
		if got := admits(t, s, 1, a) + admits(t, s, 1, b) + admits(t, s, 1, c); got != 3 {
			t.Fatalf("during publish: %d of a, b and c admitted; want all 3", got)
		}
	})
	if err != nil || published != 1 {
		t.Fatalf("Reload: %v, published %d times; want nil, once", err, published)
	}
	if _, err := s.Allow(context.Background(), []admission.Layer{a}); !errors.Is(err, admission.ErrUnknownLimit) {
		t.Fatalf("dropped a after Reload: %v; want ErrUnknownLimit", err)
	}
	if got := admits(t, s, 3, b) + admits(t, s, 3, c); got != 1+2 {
		t.Fatalf("after Reload: %d admitted of b and c; want 1 of b and 2 of c (their state kept)", got)
	}
	err = s.Reload(map[string]hotlimit.Policy{"b": frozen(4)}, func() { t.Fatal("a refused Reload published") })
	if err == nil || !strings.Contains(err.Error(), `limit "b"`) {
		t.Fatalf("Reload changing b's policy: %v; want an error naming b", err)
	}
	if got := s.Names(); strings.Join(got, ",") != "b,c" {
		t.Fatalf("after a refused Reload: limits %v; want [b c]", got)
	}
}

// TestUnknownLimitConsumesNothing: a call with a layer of a limit the
// store does not hold fails, and its other layers consume nothing.
func TestUnknownLimitConsumesNothing(t *testing.T) {
	s := open(t, Options{}, map[string]hotlimit.Policy{"a": frozen(2)})
	a := admission.Layer{Limit: "a", Key: "k", Cost: 1}
	for range 3 {
		if _, _, err := s.AllowStates(context.Background(), []admission.Layer{a, {Limit: "zzz", Key: "k", Cost: 1}}, nil); !errors.Is(err, admission.ErrUnknownLimit) {
			t.Fatalf("layer of limit zzz: %v; want ErrUnknownLimit", err)
		}
	}
	if got := admits(t, s, 3, a); got != 2 {
		t.Fatalf("a after the failed calls: %d of 3 admitted; want its 2", got)
	}
}
