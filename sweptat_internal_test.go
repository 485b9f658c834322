package hotlimit

import (
	"testing"
	"time"
)

// hookedClock is a ManualClock that runs hook once, on the read after
// the next skip reads.
type hookedClock struct {
	ManualClock
	skip int
	hook func()
}

func (c *hookedClock) Now() time.Duration {
	if h := c.hook; h != nil {
		if c.skip > 0 {
			c.skip--
		} else {
			c.hook = nil
			h()
		}
	}
	return c.ManualClock.Now()
}

// TestOnlyARemovalRaisesSweptAt replays, deterministically, a give-back
// that would leave its key fresh racing an admission on that key: the
// admission lands between the give-back's reading of the word and its
// retiring CAS, so the CAS fails and the entry stays (the give-back then
// lands on the new word). Nothing was removed, so nothing may decide as if
// it had been: a new key whose reading is older than the give-back is
// decided at its reading. When the give-back raised sweptAt before its
// CAS, the new key was decided at the give-back's instant instead, later
// than any sequential order of these calls explains.
func TestOnlyARemovalRaisesSweptAt(t *testing.T) {
	clk := &hookedClock{}
	l, err := New(TokenBucket{Rate: PerSecond(100), Burst: 5}, WithClock(clk), WithSweepInterval(0), WithShards(1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	clk.Set(5 * time.Millisecond)
	var a admission
	if v, _, _ := l.allow("k", 1, &a, l.now()); !v.ok {
		t.Fatal("first admission refused")
	}
	clk.skip = 1 // the lock-free attempt's read: it finds k would be left fresh
	clk.hook = func() {
		// Inside the give-back under the mutex, between its load of the
		// word and its CAS.
		if d := l.AllowN("k", 1); !d.Allowed {
			t.Errorf("the racing admission was refused: %+v", d)
		}
	}
	l.giveBack("k", 1, a) // leaves k fresh unless the racing admission lands first
	if n := l.Len(); n != 1 {
		t.Fatalf("Len %d after the give-back, want 1: k holds the racing admission", n)
	}
	clk.Set(0) // a reading older than the give-back
	l.Allow("x")
	if d := l.Check("x", 0); d.ResetAfter != 10*time.Millisecond {
		t.Fatalf("a new key admitted on a reading of 0 reports ResetAfter %v there, want 10ms: it was decided at %v", d.ResetAfter, d.ResetAfter-10*time.Millisecond)
	}
}
