package grpclimit_test

import (
	"errors"
	"github.com/hotlimit/hotlimit/admission"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit"
	"github.com/hotlimit/hotlimit/grpclimit"
)

// Every bad configuration is an error naming what is wrong, never a
// panic.
func TestConfigErrors(t *testing.T) {
	base := func() grpclimit.Config {
		return grpclimit.Config{
			Limits:       map[string]hotlimit.Policy{"l": hotlimit.FixedWindow{Limit: 5, Window: time.Minute}},
			Groups:       []grpclimit.Group{{Name: "g", Methods: []string{"/pkg.Svc/M"}, Limit: "l"}},
			DefaultGroup: "g",
			Key:          grpclimit.MetadataKey("authorization"),
		}
	}
	if ic, err := grpclimit.New(base()); err != nil {
		t.Fatalf("base config: %v", err)
	} else {
		ic.Close()
	}
	for _, tc := range []struct {
		want string
		edit func(*grpclimit.Config)
	}{
		{"Config.Groups is empty", func(c *grpclimit.Config) { c.Groups = nil }},
		{"Config.Limits is empty", func(c *grpclimit.Config) { c.Limits = nil }},
		{"GlobalCost must be ≥ 0, got -1", func(c *grpclimit.Config) { c.GlobalCost = -1 }},
		{`Config.Limits: name "a b"`, func(c *grpclimit.Config) { c.Limits["a b"] = c.Limits["l"] }},
		{`Config.Global "nope"`, func(c *grpclimit.Config) { c.Global = "nope" }},
		{`Config.DefaultGroup "nope"`, func(c *grpclimit.Config) { c.DefaultGroup = "nope" }},
		{`group "g": Limit "x" is not in Config.Limits`, func(c *grpclimit.Config) { c.Groups[0].Limit = "x" }},
		{`Groups[0]: name "g/1"`, func(c *grpclimit.Config) { c.Groups[0].Name = "g/1" }},
		{`duplicate group "g"`, func(c *grpclimit.Config) { c.Groups = append(c.Groups, grpclimit.Group{Name: "g", Limit: "l"}) }},
		{`Cost must be ≥ 0, got -2`, func(c *grpclimit.Config) { c.Groups[0].Cost = -2 }},
		{`method "pkg.Svc/M"`, func(c *grpclimit.Config) { c.Groups[0].Methods = []string{"pkg.Svc/M"} }},
		{`method "/pkg.Svc/"`, func(c *grpclimit.Config) { c.Groups[0].Methods = []string{"/pkg.Svc/"} }},
		{`method "/pkg.Svc"`, func(c *grpclimit.Config) { c.Groups[0].Methods = []string{"/pkg.Svc"} }},
		{`method "/a/b/c"`, func(c *grpclimit.Config) { c.Groups[0].Methods = []string{"/a/b/c"} }},
		{`method "/pkg.Svc/Get*"`, func(c *grpclimit.Config) { c.Groups[0].Methods = []string{"/pkg.Svc/Get*"} }},
		{`method "/*/M"`, func(c *grpclimit.Config) { c.Groups[0].Methods = []string{"/*/M"} }},
		{`method "/pkg.Svc/M" is already in group "g"`, func(c *grpclimit.Config) {
			c.Groups = append(c.Groups, grpclimit.Group{Name: "h", Methods: []string{"/pkg.Svc/M"}, Limit: "l"})
		}},
		{`Costs["/pkg.Svc/M"] must be ≥ 1, got 0`, func(c *grpclimit.Config) { c.Groups[0].Costs = map[string]int64{"/pkg.Svc/M": 0} }},
		{`Costs names "/pkg.Svc/N", which is not a method of the group`, func(c *grpclimit.Config) {
			c.Groups[0].Costs = map[string]int64{"/pkg.Svc/N": 2}
		}},
		{`group "g": Cost 6 is above limit "l"'s capacity 5`, func(c *grpclimit.Config) { c.Groups[0].Cost = 6 }},
		{`group "g": Costs["/pkg.Svc/M"] 9 is above limit "l"'s capacity 5`, func(c *grpclimit.Config) { c.Groups[0].Costs = map[string]int64{"/pkg.Svc/M": 9} }},
		{`Config.GlobalCost 6 is above limit "l"'s capacity 5`, func(c *grpclimit.Config) { c.Global, c.GlobalCost = "l", 6 }},
		{`Config.Backend: hotlimit`, func(c *grpclimit.Config) { c.Limits["l"] = hotlimit.FixedWindow{Limit: 0, Window: time.Minute} }},
		{`Config.Backend: no`, func(c *grpclimit.Config) {
			c.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return nil, errors.New("no") }
		}},
		{`Config.ClientIP.IPv6Bits must be in [0, 128], got 300`, func(c *grpclimit.Config) {
			c.ClientIP = &admission.ClientIP{IPv6Bits: 300}
		}},
		{`Config.ClientIP.Header "X-Real-IP" is not "X-Forwarded-For" or "Forwarded"`, func(c *grpclimit.Config) {
			c.ClientIP = &admission.ClientIP{Header: "X-Real-IP"}
		}},
		{`nil Backend`, func(c *grpclimit.Config) {
			c.Backend = func(map[string]hotlimit.Policy) (admission.Backend, error) { return nil, nil }
		}},
	} {
		cfg := base()
		tc.edit(&cfg)
		ic, err := grpclimit.New(cfg)
		if err == nil {
			ic.Close()
			t.Errorf("want error %q, got none", tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "grpclimit: ") {
			t.Errorf("error %q, want it to contain %q", err, tc.want)
		}
	}
}
