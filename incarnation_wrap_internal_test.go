package hotlimit

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestIncarnationsAcrossTheLowHalf: a slot keeps only the low 32 bits of
// its incarnation, and incarnation and holds rebuild the rest from the
// shard's insertion count. With that count started just below 2^32 and
// 2^33, a key's entry inserted below the boundary and admitted on above
// it, then out-of-order give-backs at a frozen instant (renewals, each
// taking a new incarnation), still leave the key exactly its Limit less
// what was kept, and a record of the entry a Reset removed gives nothing.
func TestIncarnationsAcrossTheLowHalf(t *testing.T) {
	for _, start := range []uint64{1<<32 - 5, 1<<33 - 7} {
		c := NewManualClock()
		c.Set(time.Hour)
		l, err := New(TokenBucket{Rate: PerSecond(100), Burst: 40}, WithClock(c), WithShards(1), WithSweepInterval(0))
		if err != nil {
			t.Fatal(err)
		}
		l.shards[0].inserted.Store(start)
		var old Admission
		if !l.AdmitN(&old, "k", 3).Allowed {
			t.Fatal("refused on a new key")
		}
		l.Reset("k") // old's entry is gone
		first := new(Admission)
		if !l.AdmitN(first, "k", 1).Allowed { // "k" again, below the boundary
			t.Fatal("refused after a Reset")
		}
		for i := range 8 {
			l.Allow(string(rune('a' + i))) // other keys: the count crosses the boundary
		}
		r := rand.New(rand.NewPCG(start, 1))
		held := []*Admission{first}
		kept := int64(0)
		for i := range 200 {
			if len(held) < 6 {
				a := new(Admission)
				if l.AdmitN(a, "k", 1).Allowed {
					held = append(held, a)
				}
				continue
			}
			j := r.IntN(len(held))
			if i%7 == 0 {
				kept++
			} else if !held[j].Refund() {
				t.Fatal("the first Refund did not spend its Admission")
			}
			held = slices.Delete(held, j, j+1)
		}
		for _, a := range held {
			a.Refund()
		}
		old.Refund() // of the entry the Reset removed: nothing
		if n := l.shards[0].inserted.Load(); n < 1<<32 && start < 1<<32 {
			t.Fatalf("the insertion count stayed below 2^32: %d", n)
		}
		if left := l.Check("k", 0).Remaining; kept+left != 40 {
			t.Errorf("start %#x: %d kept and %d left, want 40 in all", start, kept, left)
		}
		l.Close()
	}
}
