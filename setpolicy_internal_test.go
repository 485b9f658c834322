package hotlimit

import (
	"testing"
	"time"
)

// TestNeverAfterSetPolicyRaisedLimit replays, deterministically, AllowN
// racing SetPolicy: allow reads its shard's table (Limit 3), finds cost 4
// above that Limit and calls never, and SetPolicy raises the Limit to 4
// in between. The request must then be decided under the new policy: a
// denial with RetryAfter Never that reports Limit 4 is a decision under
// neither policy (the linearize module's histories found it).
func TestNeverAfterSetPolicyRaisedLimit(t *testing.T) {
	clk := NewManualClock()
	clk.Set(10 * time.Second)
	l, err := New(FixedWindow{Limit: 3, Window: time.Second}, WithClock(clk), WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if d := l.AllowN("used", 1); !d.Allowed {
		t.Fatalf("first request denied: %+v", d)
	}
	if d := l.AllowN("new", 4); d.Allowed || d.RetryAfter != Never || d.Limit != 3 {
		t.Fatalf("cost 4 under Limit 3: %+v, want a denial with RetryAfter Never and Limit 3", d)
	}
	// allow has read the table of Limit 3 and found cost 4 above it; then
	// SetPolicy raises the Limit before allow calls never.
	if err := l.SetPolicy(FixedWindow{Limit: 4, Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	now := int64(clk.Now())

	// An unknown key: cost 4 fits a fresh key under Limit 4.
	v, at, p := l.never("new", now, 4, nil)
	if d := p.decision(v, 4); !d.Allowed || d.Limit != 4 || d.Remaining != 0 || at != now {
		t.Fatalf("cost 4 on an unknown key after SetPolicy(Limit 4): %+v at %v, want admitted with Limit 4, Remaining 0 at %v", d, at, now)
	}
	if d := l.AllowN("new", 0); d.Remaining != 0 {
		t.Fatalf("the admission of cost 4 was not recorded: %+v", d)
	}

	// A key holding 1 unit: cost 4 is denied under Limit 4, until its
	// window turns, and not with Never.
	v, _, p = l.never("used", now, 4, nil)
	if d := p.decision(v, 4); d.Allowed || d.Limit != 4 || d.Remaining != 3 || d.RetryAfter != time.Second {
		t.Fatalf("cost 4 on a key holding 1 after SetPolicy(Limit 4): %+v, want denied with Limit 4, Remaining 3, RetryAfter 1s", d)
	}
}
