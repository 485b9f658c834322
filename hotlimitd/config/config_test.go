package config_test

import (
	"testing"

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
