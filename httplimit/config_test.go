package httplimit

import (
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
)

func TestConfigErrors(t *testing.T) {
	ok := func() Config {
		return Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 1, Window: time.Minute}},
			Groups:       []Group{{Name: "g", Limit: "l", Patterns: []string{"/x"}}},
			DefaultGroup: "g",
			Key:          TokenKey("Authorization"),
		}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no groups", func(c *Config) { c.Groups = nil }, "Config.Groups"},
		{"unknown default", func(c *Config) { c.DefaultGroup = "nope" }, "DefaultGroup"},
		{"unknown limit", func(c *Config) { c.Groups[0].Limit = "nope" }, `Limit "nope"`},
		{"unknown global", func(c *Config) { c.Global = "nope" }, "Config.Global"},
		{"bad group name", func(c *Config) { c.Groups[0].Name = "a:b" }, `name "a:b"`},
		{"bad limit name", func(c *Config) {
			c.Limits = map[string]hotlimit.Policy{`a"b`: hotlimit.FixedWindow{Limit: 1, Window: 1}}
		}, "Config.Limits"},
		{"duplicate group", func(c *Config) { c.Groups = append(c.Groups, Group{Name: "g", Exempt: true}) }, "duplicate"},
		{"bad pattern", func(c *Config) { c.Groups[0].Patterns = []string{"GET /{"} }, "pattern"},
		{"duplicate pattern", func(c *Config) {
			c.Groups = append(c.Groups, Group{Name: "h", Exempt: true, Patterns: []string{"/x"}})
		}, "already in group"},
		{"conflicting pattern", func(c *Config) {
			c.Groups = append(c.Groups, Group{Name: "h", Exempt: true, Patterns: []string{"/{a}/y"}})
			c.Groups[0].Patterns = []string{"/x/{b}"}
		}, "pattern"},
		{"negative cost", func(c *Config) { c.Groups[0].Cost = -1 }, "Cost"},
		{"bad policy", func(c *Config) { c.Limits["l"] = hotlimit.FixedWindow{Limit: 0, Window: time.Minute} }, "Limit must be > 0"},
		{"nil policy", func(c *Config) { c.Limits["l"] = nil }, "unsupported policy"},
		{"nil policy pointer", func(c *Config) { c.Limits["l"] = (*hotlimit.TokenBucket)(nil) }, "nil"},
		{"bad header mode", func(c *Config) { c.Headers = 9 }, "HeaderMode"},
		{"bad client ip", func(c *Config) { c.ClientIP = &admission.ClientIP{IPv6Bits: 200} }, "IPv6Bits"},
		{"factory error", func(c *Config) {
			c.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return nil, errors.New("no redis") }
		}, "no redis"},
		{"nil backend", func(c *Config) {
			c.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return nil, nil }
		}, "nil Backend"},
	}
	for _, tt := range tests {
		cfg := ok()
		tt.mutate(&cfg)
		m, err := New(cfg)
		if err == nil {
			m.Close()
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "httplimit: ") {
			t.Errorf("%s: error %q, want it to mention %q", tt.name, err, tt.want)
		}
	}
	m, err := New(ok())
	if err != nil {
		t.Fatalf("valid config: %v", err)
	}
	m.Close()
}
