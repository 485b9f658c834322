package config_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

func names(t *testing.T, c *config.Config) map[string]string {
	t.Helper()
	// By rule: the first entry's key and value and the limit's line
	// change between the files; Match finds the rule.
	out := map[string]string{}
	for _, es := range [][]config.Entry{d("a", "1", "b", "2"), d("ip", "1"), d("ip", "10.1"), d("x", "y")} {
		if l, _, ok := c.Match(nil, "d", es); ok {
			out[es[0].Key+"/"+es[len(es)-1].Value] = l.Name
		}
	}
	return out
}

// A limit's Name survives what does not change its place or its policy
// (lines, order, comments, cost, shadow_mode, name, other rules), and
// changes with its policy.
func TestNameStable(t *testing.T) {
	base := parse(t, `domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 10}
  - key: ip
    value: "10*"
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token_bucket, burst: 3}
  - key: ip
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
	same := parse(t, `# reordered, commented, costs and shadow changed
domain: d
descriptors:
  - key: x
    rate_limit: {unlimited: true}
  - key: ip
    shadow_mode: true
    rate_limit:
      unit: MINUTE
      requests_per_unit: 5
      cost: 2
      name: per-ip
  - key: ip
    value: "10*"
    rate_limit: {unit: minute, algorithm: token_bucket, requests_per_unit: 5, burst: 3, cost: 3}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 10, algorithm: fixed_window}
`)
	b, s := names(t, base), names(t, same)
	for k, n := range b {
		if s[k] != n {
			t.Errorf("%s: Name %q became %q", k, n, s[k])
		}
	}
	for _, changed := range []string{
		`{unit: second, requests_per_unit: 11}`,
		`{unit: minute, requests_per_unit: 10}`,
		`{unit: second, requests_per_unit: 10, algorithm: sliding_window}`,
		`{unit: second, requests_per_unit: 10, algorithm: token_bucket}`,
	} {
		c := parse(t, "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        rate_limit: "+changed+"\n")
		if n := names(t, c)["a/2"]; n == b["a/2"] || n == "" {
			t.Errorf("rate_limit %s: Name %q, the same as before", changed, n)
		}
	}
	bursts := parse(t, "domain: d\ndescriptors:\n  - key: ip\n    value: '10*'\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: token_bucket, burst: 4}\n")
	if n := names(t, bursts)["ip/10.1"]; n == b["ip/10.1"] {
		t.Errorf("burst 3 → 4 kept the Name %q", n)
	}
}

// Names are unique: rules whose keys and values would run together in a
// naive join are told apart.
func TestNamesUnique(t *testing.T) {
	c := parse(t, `domain: d
descriptors:
  - key: a/b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a=b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    value: b
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "a#fixed_window:1/second"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "a%2Fb"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "a b"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "{tag}"
    value: "{v}é"
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	all := c.All()
	seen := map[string]bool{}
	for _, l := range all {
		if seen[l.Name] {
			t.Errorf("Name %q twice", l.Name)
		}
		seen[l.Name] = true
		// redislimit (and so lease) refuses braces in limit names.
		if strings.ContainsAny(l.Name, "{}") {
			t.Errorf("Name %q has a brace", l.Name)
		}
	}
	if len(seen) != 8 || len(c.Limits()) != 8 {
		t.Errorf("names: %v", slices.Sorted(maps.Keys(seen)))
	}
	// Across domains too.
	two := parse(t, "domain: x\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n---\ndomain: y\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n")
	if ls := two.All(); len(ls) != 2 || ls[0].Name == ls[1].Name {
		t.Errorf("two domains: %v", ls)
	}
}
