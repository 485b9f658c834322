package hotlimit

import "testing"

// TestDenialAfterSetPolicyCreatesNoEntry: AllowN for a key its lock-free
// probe did not find goes on under the shard's mutex, on the table it reads
// there; if SetPolicy lowered the limit below the cost in between, the
// request is denied with Never, and like every denial it must leave no
// entry behind (nor, under WithMaxKeys, take a key's room). The test runs
// that interleaving in order: the policy change, then the locked path.
func TestDenialAfterSetPolicyCreatesNoEntry(t *testing.T) {
	for _, p := range []Policy{
		TokenBucket{Rate: PerSecond(10), Burst: 10},
		LeakyBucket{Rate: PerSecond(10), Capacity: 9},
		FixedWindow{Limit: 10, Window: 1e9},
		SlidingWindow{Limit: 10, Window: 1e9},
	} {
		l, err := New(p, WithClock(NewManualClock()), WithSweepInterval(0), WithMaxKeys(1))
		if err != nil {
			t.Fatal(err)
		}
		l.AllowN("other", 10) // drained: the only key, holding the room
		h := l.hash("k")
		s := l.shardOf(h)
		lower := map[kind]Policy{
			kindTokenBucket:   TokenBucket{Rate: PerSecond(10), Burst: 4},
			kindLeakyBucket:   LeakyBucket{Rate: PerSecond(10), Capacity: 3},
			kindFixedWindow:   FixedWindow{Limit: 4, Window: 1e9},
			kindSlidingWindow: SlidingWindow{Limit: 4, Window: 1e9},
		}[l.kind]
		if err := l.SetPolicy(lower); err != nil {
			t.Fatal(err)
		}
		v, _, _ := l.allowSlow(s, h, "k", l.now(), 8, nil) // as AllowN("k", 8) that read the old table
		if v.ok || v.retry != int64(Never) {
			t.Errorf("%T: cost 8 over limit 4 decided %+v, want a denial with Never", p, v)
		}
		if l.Len() != 1 || l.AllowN("other", 0).Remaining != 0 {
			t.Errorf("%T: the denial left Len() = %d and other's Remaining %d; want 1 and 0 (other kept, no entry for k)", p, l.Len(), l.AllowN("other", 0).Remaining)
		}
		l.Close()
	}
}
