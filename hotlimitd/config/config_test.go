package config_test

import (
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

// A Unit converts to the protocol's unit by number.
func TestUnitIsTheProtocolUnit(t *testing.T) {
	for u := config.Second; u <= config.Week; u++ {
		p := rlsv3.RateLimitResponse_RateLimit_Unit(u)
		if got := p.String(); got != map[config.Unit]string{
			config.Second: "SECOND", config.Minute: "MINUTE", config.Hour: "HOUR", config.Day: "DAY",
			config.Week: "WEEK", config.Month: "MONTH", config.Year: "YEAR",
		}[u] {
			t.Errorf("Unit %v is the protocol's %s", u, got)
		}
		if u.Duration() <= 0 {
			t.Errorf("%v.Duration() = %v", u, u.Duration())
		}
	}
	day := 24 * time.Hour
	for u, want := range map[config.Unit]time.Duration{
		config.Second: time.Second, config.Minute: time.Minute, config.Hour: time.Hour, config.Day: day,
		config.Week: 7 * day, config.Month: 30 * day, config.Year: 365 * day,
	} {
		if u.Duration() != want {
			t.Errorf("%v.Duration() = %v, want %v", u, u.Duration(), want)
		}
	}
	if config.Unit(0).Duration() != 0 || config.Unit(8).String() != "Unit(8)" {
		t.Error("a number that is not a unit")
	}
}

// The built-in configuration parses and limits what its doc says.
func TestDefault(t *testing.T) {
	c := config.Default()
	check(t, c, "hotlimitd", d("generic_key", "a"), want{rpu: 100, unit: config.Second})
	l := check(t, c, "hotlimitd", d("remote_address", "10.0.0.1"), want{rpu: 10, unit: config.Second})
	if l.Algorithm != config.SlidingWindow {
		t.Errorf("remote_address: %v", l.Algorithm)
	}
	check(t, c, "hotlimitd", d("remote_address", "10.0.0.1", "path", "/"), want{rpu: 60, unit: config.Minute})
	if g := check(t, c, "hotlimitd", d("generic_key", "a"), want{rpu: 100, unit: config.Second}); g.Algorithm != config.TokenBucket || g.Burst != 100 {
		t.Errorf("generic_key: %v burst %d", g.Algorithm, g.Burst)
	}
	if len(c.Limits()) != 3 {
		t.Errorf("Limits: %v", c.Limits())
	}
}

// A Config serves Match, Limits and All from many goroutines at once
// (run with -race), and Limits' map is the caller's.
func TestConcurrentUse(t *testing.T) {
	c := load(t, example("2"))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			buf := make([]byte, 0, 64)
			for i := range 200 {
				es := d("message_type", "marketing", "to_number", string(rune('0'+(g+i)%10)))
				if _, _, ok := c.Match(buf[:0], "messaging", es); !ok {
					t.Error("no match")
					return
				}
				m := c.Limits()
				clear(m)
				_ = c.All()
			}
		})
	}
	wg.Wait()
	if len(c.Limits()) != 2 {
		t.Error("clearing Limits' map changed the Config")
	}
}

// The zero Config matches nothing and has no limits.
func TestZeroConfig(t *testing.T) {
	var c config.Config
	if _, _, ok := c.Match(nil, "d", d("k", "v")); ok || len(c.Limits()) != 0 || len(c.All()) != 0 || len(c.Domains()) != 0 {
		t.Error("the zero Config is not empty")
	}
}
