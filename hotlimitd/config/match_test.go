package config_test

import (
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	c, err := config.Parse("f.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const nested = `domain: d
descriptors:
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: ip
    value: "10.*"
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: ip
    value: "10.0.*"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: ip
    value: "10.0.0.1"
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: tenant
    value: "acme-*"
    share_threshold: true
    descriptors:
      - key: user
        rate_limit: {unit: second, requests_per_unit: 6}
  - key: leaf
    value: x
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: leaf
    rate_limit: {unit: second, requests_per_unit: 8}
    descriptors:
      - key: sub
        rate_limit: {unit: second, requests_per_unit: 9}
`

// The order of rules at a level: key and value, then the first wildcard
// in file order, then the key alone; and no falling back once a rule is
// picked.
func TestMatchOrder(t *testing.T) {
	c := parse(t, nested)
	sec := func(n int64) want { return want{rpu: n, unit: config.Second} }
	for _, tc := range []struct {
		entries []config.Entry
		want    want
	}{
		{d("a", "1", "b", "2"), sec(1)},
		{d("a", "1"), none},                     // a has no rate_limit
		{d("a", "1", "b", "2", "c", "3"), none}, // deeper than the rules
		{d("a", "1", "c", "3"), none},
		{d("ip", "10.0.0.1"), sec(4)}, // exact before wildcards
		{d("ip", "10.0.0.2"), sec(2)}, // the first wildcard in file order, not the longest
		{d("ip", "10.1.0.1"), sec(2)}, //
		{d("ip", "10."), sec(2)},      // an empty rest matches
		{d("ip", "11.0.0.1"), sec(5)}, // key alone
		{d("ip", ""), sec(5)},         // an empty value is a value like any
		{d("ip", "10.*"), sec(2)},     // the written value matches itself
		{d("tenant", "acme-1", "user", "u"), sec(6)},
		{d("tenant", "acme-1"), none},
		{d("tenant", "other", "user", "u"), none},
		{d("leaf", "x", "sub", "s"), none}, // leaf=x is picked and has no children: no fallback to leaf
		{d("leaf", "y", "sub", "s"), sec(9)},
		{d("leaf", "y"), sec(8)},
		{d("leaf", "x"), sec(7)},
		{nil, none},
		{d("", ""), none},
	} {
		check(t, c, "d", tc.entries, tc.want)
	}
	check(t, c, "", d("ip", "1"), none)
	check(t, c, "D", d("ip", "1"), none)
}

// Keys: each value apart for key-only and wildcard rules, one counter for
// a share_threshold wildcard, and no two descriptors sharing a key
// because of where their values split.
func TestMatchKeys(t *testing.T) {
	c := parse(t, nested)
	_, k1 := key(t, c, "d", d("a", "ab", "b", "c"))
	_, k2 := key(t, c, "d", d("a", "a", "b", "bc"))
	_, k3 := key(t, c, "d", d("a", "", "b", "abc"))
	if k1 == k2 || k2 == k3 || k1 == k3 {
		t.Errorf("values split differently share a key: %q %q %q", k1, k2, k3)
	}
	_, w1 := key(t, c, "d", d("ip", "10.1.1.1"))
	_, w2 := key(t, c, "d", d("ip", "10.1.1.2"))
	if w1 == w2 {
		t.Error("two values of a wildcard share a key")
	}
	_, s1 := key(t, c, "d", d("tenant", "acme-1", "user", "u"))
	_, s2 := key(t, c, "d", d("tenant", "acme-2", "user", "u"))
	_, s3 := key(t, c, "d", d("tenant", "acme-2", "user", "v"))
	if s1 != s2 {
		t.Errorf("share_threshold: acme-1 and acme-2 have keys %q and %q, want one", s1, s2)
	}
	if s2 == s3 {
		t.Error("share_threshold shared the next level's values too")
	}
	// Match appends to dst and leaves it alone when nothing matches.
	dst := []byte("prefix")
	_, k, ok := c.Match(dst, "d", d("ip", "1"))
	if !ok || !strings.HasPrefix(string(k), "prefix") || len(k) <= len("prefix") {
		t.Errorf("Match(dst) = %q, %v", k, ok)
	}
	if _, k, ok := c.Match(dst, "d", d("nope", "1")); ok || string(k) != "prefix" {
		t.Errorf("no match: key %q, ok %v", k, ok)
	}
	if _, k, ok := c.Match(dst, "d", d("a", "1", "b", "2", "c", "3")); ok || string(k) != "prefix" {
		t.Errorf("no match after matching levels: key %q, ok %v", k, ok)
	}
}

// Match does not allocate when dst has room.
func TestMatchAllocs(t *testing.T) {
	c := parse(t, nested)
	buf := make([]byte, 0, 128)
	for _, es := range [][]config.Entry{
		d("a", "1", "b", "2"), d("ip", "10.0.0.1"), d("ip", "10.0.0.2"), d("ip", "11.0.0.1"),
		d("tenant", "acme-1", "user", "u"), d("nope", "x"), d("a", "1", "b", "2", "c", "3"),
	} {
		if n := testing.AllocsPerRun(100, func() { c.Match(buf[:0], "d", es) }); n != 0 {
			t.Errorf("Match(%v): %v allocations", es, n)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	c := parse(b, nested)
	buf := make([]byte, 0, 128)
	for _, bc := range []struct {
		name    string
		entries []config.Entry
	}{
		{"exact", d("ip", "10.0.0.1")},
		{"wildcard", d("ip", "10.0.0.2")},
		{"keyOnly", d("ip", "192.168.10.20")},
		{"nested", d("a", "client-1234", "b", "/api/v1/items")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Match(buf[:0], "d", bc.entries)
			}
		})
	}
}
