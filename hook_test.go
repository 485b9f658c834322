package hotlimit_test

import (
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit"
)

func TestDenyHook(t *testing.T) {
	type call struct {
		h uint64
		d hotlimit.Decision
	}
	var calls []call
	c := hotlimit.NewManualClock()
	l, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, hotlimit.WithClock(c), hotlimit.WithSweepInterval(0),
		hotlimit.WithDenyHook(func(h uint64, d hotlimit.Decision) { calls = append(calls, call{h, d}) }))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Allow("secret-token")
	l.AllowN("secret-token", 0)
	if len(calls) != 0 {
		t.Fatalf("hook called on the allow path: %+v", calls)
	}
	d := l.Allow("secret-token")
	l.AllowN("secret-token", 5)
	l.Allow("other")
	l.Allow("other")
	if len(calls) != 3 || calls[0].d != d || calls[1].d.RetryAfter != hotlimit.Never {
		t.Fatalf("calls = %+v", calls)
	}
	if calls[0].h != calls[1].h || calls[0].h == calls[2].h {
		t.Fatalf("hashes do not identify keys: %+v", calls)
	}
	if _, err := hotlimit.New(hotlimit.TokenBucket{Rate: hotlimit.PerSecond(1), Burst: 1}, hotlimit.WithDenyHook(nil)); err == nil || !strings.Contains(err.Error(), "WithDenyHook") {
		t.Fatalf("nil hook: %v", err)
	}
}
