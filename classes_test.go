package hotlimit_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestClasses(t *testing.T) {
	clock := hotlimit.NewManualClock()
	c, err := hotlimit.NewClasses(map[string]hotlimit.Policy{
		"free": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 2},
		"paid": hotlimit.TokenBucket{Rate: hotlimit.PerMinute(600), Burst: 50},
	}, hotlimit.WithClock(clock), hotlimit.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := strings.Join(c.Names(), ","); got != "free,paid" {
		t.Fatalf("Names() = %s", got)
	}
	for i := range 2 {
		if !c.Allow("free", "tenant-a").Allowed {
			t.Fatalf("free request %d denied", i)
		}
	}
	if d := c.Allow("free", "tenant-a"); d.Allowed || d.RetryAfter != 6*time.Second {
		t.Fatalf("third free request: %+v", d)
	}
	// The same tenant on the paid plan has the paid plan's own state.
	if d := c.AllowN("paid", "tenant-a", 0); d.Remaining != 50 || d.Limit != 50 {
		t.Fatalf("paid peek: %+v", d)
	}
	if d := c.Allow("gold", "tenant-a"); d.Allowed || d.RetryAfter != hotlimit.Never {
		t.Fatalf("unknown class: %+v", d)
	}
	if err := c.SetPolicy("free", hotlimit.TokenBucket{Rate: hotlimit.PerMinute(10), Burst: 5}); err != nil {
		t.Fatal(err)
	}
	if d := c.Class("free").AllowN("tenant-a", 0); d.Remaining != 3 {
		t.Fatalf("after raising the free burst to 5: %+v, want 3 remaining", d)
	}
	if err := c.SetPolicy("gold", hotlimit.TokenBucket{}); err == nil {
		t.Fatal("SetPolicy on an unknown class succeeded")
	}
	if c.Class("gold") != nil {
		t.Fatal("Class of an unknown class is not nil")
	}
}

func TestNewClassesErrors(t *testing.T) {
	if _, err := hotlimit.NewClasses(nil); err == nil {
		t.Fatal("no classes accepted")
	}
	_, err := hotlimit.NewClasses(map[string]hotlimit.Policy{
		"ok":  hotlimit.FixedWindow{Limit: 1, Window: time.Second},
		"bad": hotlimit.FixedWindow{Limit: 0, Window: time.Second},
	})
	if err == nil || !strings.Contains(err.Error(), `class "bad"`) || !strings.Contains(err.Error(), "FixedWindow.Limit must be > 0") {
		t.Fatalf("err = %v", err)
	}
}
