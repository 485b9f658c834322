package backend

import (
	"fmt"
	"os"
	"testing"

	"github.com/hotlimit/hotlimit/admission"
	"github.com/hotlimit/hotlimit/hotlimitd/config"
	"github.com/hotlimit/hotlimit/internal/redistest"
)

// rules is a config whose limits refill one unit a day: a test never
// sees one come back. %d is b's burst.
const rules = `domain: d
descriptors:
  - key: a
    rate_limit: {unit: day, requests_per_unit: 1, algorithm: token_bucket, burst: 3}
  - key: b
    rate_limit: {unit: day, requests_per_unit: 1, algorithm: token_bucket, burst: %d}
`

// TestConfigReload: a store built from hotlimitd's config and reloaded
// with a config that changes one rule's policy keeps the state of the
// unchanged rule and starts the changed one afresh (its name changed), in
// process and in Redis.
func TestConfigReload(t *testing.T) {
	opts := map[string]Options{"local": {}}
	if os.Getenv(redistest.AddrEnv) != "" || inCI() {
		opts["redis"] = servers(t, Redis)["server"]
	}
	for name, o := range opts {
		t.Run(name, func(t *testing.T) {
			c1, err := config.Parse("v1.yaml", fmt.Appendf(nil, rules, 3))
			if err != nil {
				t.Fatal(err)
			}
			c2, err := config.Parse("v2.yaml", fmt.Appendf(nil, rules, 5))
			if err != nil {
				t.Fatal(err)
			}
			layer := func(c *config.Config, key string) admission.Layer {
				l, k, ok := c.Match(nil, "d", []config.Entry{{Key: key, Value: "v"}})
				if !ok {
					t.Fatalf("no rule for %s", key)
				}
				return admission.Layer{Limit: l.Name, Key: string(k), Cost: 1}
			}
			s := open(t, o, c1.Limits())
			if got := admits(t, s, 2, layer(c1, "a")) + admits(t, s, 2, layer(c1, "b")); got != 4 {
				t.Fatalf("v1: %d admitted; want 4", got)
			}
			if err := s.Reload(c2.Limits(), func() {}); err != nil {
				t.Fatal(err)
			}
			if got := admits(t, s, 5, layer(c2, "a")); got != 1 {
				t.Fatalf("v2, unchanged rule a: %d of 5 admitted; want its 1 left", got)
			}
			if got := admits(t, s, 6, layer(c2, "b")); got != 5 {
				t.Fatalf("v2, rule b with a new burst: %d of 6 admitted; want 5 (fresh)", got)
			}
		})
	}
}
