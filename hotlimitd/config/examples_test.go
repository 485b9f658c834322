package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

// d builds a descriptor from key, value pairs.
func d(kvs ...string) []config.Entry {
	var es []config.Entry
	for i := 0; i+1 < len(kvs); i += 2 {
		es = append(es, config.Entry{Key: kvs[i], Value: kvs[i+1]})
	}
	return es
}

func load(t *testing.T, path string) *config.Config {
	t.Helper()
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// want is what one descriptor should match: nothing (rpu < 0), or a limit
// of rpu per unit with the given flags.
type want struct {
	rpu       int64
	unit      config.Unit
	unlimited bool
	shadow    bool
}

var none = want{rpu: -1}

func check(t *testing.T, c *config.Config, domain string, entries []config.Entry, w want) *config.Limit {
	t.Helper()
	l, key, ok := c.Match(nil, domain, entries)
	if w.rpu < 0 {
		if ok || l != nil || len(key) != 0 {
			t.Errorf("%s %v: matched %+v (key %q), want no match", domain, entries, l, key)
		}
		return nil
	}
	if !ok || l == nil {
		t.Fatalf("%s %v: no match, want %+v", domain, entries, w)
	}
	if l.Unlimited != w.unlimited || l.Shadow != w.shadow {
		t.Errorf("%s %v: unlimited %v shadow %v, want %v %v", domain, entries, l.Unlimited, l.Shadow, w.unlimited, w.shadow)
	}
	if !w.unlimited && (int64(l.RequestsPerUnit) != w.rpu || l.Unit != w.unit) {
		t.Errorf("%s %v: %d per %v, want %d per %v", domain, entries, l.RequestsPerUnit, l.Unit, w.rpu, w.unit)
	}
	if l.Domain != domain {
		t.Errorf("%s %v: Domain %q", domain, entries, l.Domain)
	}
	return l
}

// key returns the backend key of a descriptor that matches.
func key(t *testing.T, c *config.Config, domain string, entries []config.Entry) (*config.Limit, string) {
	t.Helper()
	l, k, ok := c.Match(nil, domain, entries)
	if !ok {
		t.Fatalf("%s %v: no match", domain, entries)
	}
	return l, string(k)
}

func example(n string) string { return filepath.Join("testdata", "envoy", "example"+n+".yaml") }

// Example 1: two values of one key, each its own limit of 500 a second.
func TestExample1(t *testing.T) {
	c := load(t, example("1"))
	users := check(t, c, "mongo_cps", d("database", "users"), want{rpu: 500, unit: config.Second})
	def := check(t, c, "mongo_cps", d("database", "default"), want{rpu: 500, unit: config.Second})
	if users == def || users.Name == def.Name {
		t.Errorf("users and default share a limit: %q", users.Name)
	}
	check(t, c, "mongo_cps", d("database", "other"), none)
	check(t, c, "mongo_cps", d("database", "users", "table", "x"), none)
	check(t, c, "other_domain", d("database", "users"), none)
	if got := len(c.Limits()); got != 2 {
		t.Errorf("Limits: %d, want 2", got)
	}
}

// Example 2: a nested key-only rule counts each number apart (5 a day),
// and the top-level key-only rule gives each number 100 a day.
func TestExample2(t *testing.T) {
	c := load(t, example("2"))
	const dom = "messaging"
	m1 := check(t, c, dom, d("message_type", "marketing", "to_number", "2061111111"), want{rpu: 5, unit: config.Day})
	m2 := check(t, c, dom, d("message_type", "marketing", "to_number", "2062222222"), want{rpu: 5, unit: config.Day})
	if m1 != m2 {
		t.Error("two numbers under marketing match different rules")
	}
	_, k1 := key(t, c, dom, d("message_type", "marketing", "to_number", "2061111111"))
	_, k2 := key(t, c, dom, d("message_type", "marketing", "to_number", "2062222222"))
	if k1 == k2 {
		t.Errorf("two numbers share the key %q: each must get its own 5 a day", k1)
	}
	n1 := check(t, c, dom, d("to_number", "2061111111"), want{rpu: 100, unit: config.Day})
	_, k3 := key(t, c, dom, d("to_number", "2061111111"))
	_, k4 := key(t, c, dom, d("to_number", "2062222222"))
	if k3 == k4 {
		t.Errorf("two numbers share the key %q: each must get its own 100 a day", k3)
	}
	if n1 == m1 || n1.Name == m1.Name {
		t.Error("the nested and the top-level to_number rules share a limit")
	}
	// The README's request: both descriptors match, each its own limit.
	check(t, c, dom, d("message_type", "marketing"), none) // a placeholder, no limit
	check(t, c, dom, d("message_type", "transactional", "to_number", "2061111111"), none)
}

// Example 3: key and value are tried before the key alone; 0 refuses.
func TestExample3(t *testing.T) {
	c := load(t, example("3"))
	const dom = "edge_proxy_per_ip"
	l := check(t, c, dom, d("remote_address", "50.0.0.1"), want{rpu: 10, unit: config.Second})
	if l.Refuses() || l.Policy == nil {
		t.Errorf("50.0.0.1: Refuses %v, Policy %v", l.Refuses(), l.Policy)
	}
	_, k1 := key(t, c, dom, d("remote_address", "50.0.0.1"))
	_, k2 := key(t, c, dom, d("remote_address", "50.0.0.2"))
	if k1 == k2 {
		t.Error("two addresses share a key: each must get its own 10 a second")
	}
	b := check(t, c, dom, d("remote_address", "50.0.0.5"), want{rpu: 0, unit: config.Second})
	if !b.Refuses() || b.Policy != nil || b.Name != "edge_proxy_per_ip/remote_address=50.0.0.5#refuse" {
		t.Errorf("50.0.0.5: Refuses %v, Policy %v, Name %q: want every hit refused", b.Refuses(), b.Policy, b.Name)
	}
	if _, ok := c.Limits()[b.Name]; ok {
		t.Error("the refusing limit is in Limits")
	}
	if all := c.All(); len(all) != 2 || all[1] != b {
		t.Errorf("All: %v, want both limits", all)
	}
}

// Example 4: a descriptor matches only rules as deep as it is long.
func TestExample4(t *testing.T) {
	req := d("key", "value", "subkey", "subvalue")
	check(t, load(t, example("4a")), "example4", req, none)
	c := load(t, example("4b"))
	check(t, c, "example4", req, want{rpu: 300, unit: config.Second})
	check(t, c, "example4", d("key", "value"), none)
}

// Example 5: an unlimited rule matches (unlike no rule) and never counts.
func TestExample5(t *testing.T) {
	c := load(t, example("5"))
	l := check(t, c, "internal", d("ldap", "anyone"), want{unlimited: true})
	if l.Policy != nil || l.Refuses() || l.Name != "internal/ldap#unlimited" {
		t.Errorf("ldap: Policy %v Refuses %v Name %q", l.Policy, l.Refuses(), l.Name)
	}
	if _, ok := c.Limits()[l.Name]; ok {
		t.Error("the unlimited limit is in Limits")
	}
	check(t, c, "internal", d("azure", "x"), want{rpu: 100, unit: config.Minute})
	check(t, c, "internal", d("gcp", "x"), none)
	if got := len(c.Limits()); got != 1 {
		t.Errorf("Limits: %d, want 1", got)
	}
	if all := c.All(); len(all) != 2 || all[0] != l {
		t.Errorf("All: %v, want the unlimited limit and azure's", all)
	}
}

// Example 6: user-a's limit is in shadow mode, user-b's is enforced.
func TestExample6(t *testing.T) {
	c := load(t, example("6"))
	check(t, c, "example6", d("service", "auth-service", "user", "user-a"), want{rpu: 10, unit: config.Second, shadow: true})
	check(t, c, "example6", d("service", "auth-service", "user", "user-b"), want{rpu: 20, unit: config.Second})
	check(t, c, "example6", d("service", "auth-service", "user", "user-c"), none)
}

// Example 7: when one request matches both, the replacing limit (10 a
// second) is decided and the replaced one (5 a second) is left alone.
func TestExample7(t *testing.T) {
	c := load(t, example("7"))
	a := check(t, c, "example7", d("key_1", "value_1", "user", "bkthomps"), want{rpu: 5, unit: config.Second})
	b := check(t, c, "example7", d("key_2", "value_2", "user", "bkthomps"), want{rpu: 10, unit: config.Second})
	if a.RuleName != "specific_limit" || !slices.Equal(b.Replaces, []string{"specific_limit"}) {
		t.Fatalf("RuleName %q, Replaces %q", a.RuleName, b.Replaces)
	}
	for _, ls := range [][]*config.Limit{{a, b}, {b, a}, {a, nil, b}} {
		got := slices.Clone(ls)
		config.DropReplaced(got)
		for i, l := range got {
			if wantNil := ls[i] == a || ls[i] == nil; (l == nil) != wantNil {
				t.Errorf("DropReplaced(%v)[%d] = %v", ls, i, l)
			}
		}
	}
	alone := []*config.Limit{a}
	config.DropReplaced(alone)
	if alone[0] != a {
		t.Error("DropReplaced dropped specific_limit with nothing replacing it")
	}
}

// Example 8: detailed_metric is carried on the key-only rule; matching is
// as usual.
func TestExample8(t *testing.T) {
	c := load(t, example("8"))
	u := check(t, c, "example8", d("key1", "unspecified_value"), want{rpu: 10, unit: config.Minute})
	check(t, c, "example8", d("key1", "unspecified_value2"), want{rpu: 10, unit: config.Minute})
	v := check(t, c, "example8", d("key1", "value1"), want{rpu: 20, unit: config.Minute})
	if !u.DetailedMetric || v.DetailedMetric {
		t.Errorf("DetailedMetric: key-only %v, value1 %v; want true, false", u.DetailedMetric, v.DetailedMetric)
	}
}

// Example 9: a wildcard value matches every value with its prefix, each
// counted apart.
func TestExample9(t *testing.T) {
	c := load(t, example("9"))
	check(t, c, "example9", d("key1", "value1"), want{rpu: 20, unit: config.Minute})
	check(t, c, "example9", d("key1", "value2"), want{rpu: 20, unit: config.Minute})
	check(t, c, "example9", d("key1", "value"), want{rpu: 20, unit: config.Minute})
	check(t, c, "example9", d("key1", "valu"), none)
	check(t, c, "example9", d("key2", "value1"), none)
	_, k1 := key(t, c, "example9", d("key1", "value1"))
	_, k2 := key(t, c, "example9", d("key1", "value2"))
	if k1 == k2 {
		t.Error("two values of a wildcard share a key")
	}
}

// Every example loads together from the directory, one domain each
// (example4a and example4b share theirs, so the directory holds one).
func TestExamplesDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"1", "2", "3", "4b", "5", "6", "7", "8", "9"} {
		copyFile(t, example(n), filepath.Join(dir, "example"+n+".yaml"))
	}
	copyFile(t, filepath.Join("testdata", "envoy", "demo.yaml"), filepath.Join(dir, "demo.yaml"))
	c := load(t, dir)
	if got := len(c.Domains()); got != 10 {
		t.Errorf("Domains: %v", c.Domains())
	}
	check(t, c, "messaging", d("to_number", "1"), want{rpu: 100, unit: config.Day})
}

// Every replaces of a request counts, whatever the order of its
// descriptors: two limits that replace each other are both dropped, as
// envoyproxy/ratelimit collects the names replaced before dropping any.
func TestDropReplacedOrder(t *testing.T) {
	x := &config.Limit{RuleName: "x", Replaces: []string{"y"}}
	y := &config.Limit{RuleName: "y", Replaces: []string{"x"}}
	z := &config.Limit{RuleName: "z"}
	for _, ls := range [][]*config.Limit{{x, y, z}, {y, x, z}, {z, y, x}} {
		got := slices.Clone(ls)
		config.DropReplaced(got)
		for i, l := range got {
			if (l == nil) != (ls[i] != z) {
				t.Errorf("DropReplaced(%v)[%d] = %v", ls, i, l)
			}
		}
	}
	many := make([]*config.Limit, 100)
	many[99], many[0] = x, &config.Limit{RuleName: "y"}
	config.DropReplaced(many)
	if many[0] != nil || many[99] != x {
		t.Error("DropReplaced over 64 limits")
	}
	if n := testing.AllocsPerRun(100, func() { config.DropReplaced([]*config.Limit{x, y, z}) }); n != 0 {
		t.Errorf("DropReplaced: %v allocations", n)
	}
}

// The configuration of envoyproxy/ratelimit's docker-compose demo, with
// the answers its README gives for each curl.
func TestExampleDemo(t *testing.T) {
	c := load(t, filepath.Join("testdata", "envoy", "demo.yaml"))
	const dom = "rl"
	check(t, c, dom, d("source_cluster", "proxy", "destination_cluster", "mock"), want{rpu: 1, unit: config.Minute})
	check(t, c, dom, d("foo", "foo"), want{rpu: 2, unit: config.Minute})                               // /header
	check(t, c, dom, d("foo", "foo", "bar", "bar"), want{rpu: 3, unit: config.Minute})                 // /twoheader foo, bar
	check(t, c, dom, d("foo", "foo", "baz", "baz"), want{rpu: 1, unit: config.Second})                 // "will be rate limited"
	check(t, c, dom, d("foo", "foo", "baz", "not-so-shady"), want{rpu: 1, unit: config.Second})        // subject to limiting
	check(t, c, dom, d("foo", "foo", "baz", "shady"), want{rpu: 1, unit: config.Minute, shadow: true}) // never limited
	check(t, c, dom, d("foo", "foo", "bay", "x"), want{unlimited: true})
	check(t, c, dom, d("qux", "x"), want{unlimited: true})
	if b := check(t, c, dom, d("foo", "foo", "bar", "banned"), want{rpu: 0, unit: config.Minute}); !b.Refuses() {
		t.Error("bar: banned does not refuse every hit")
	}
}

// value_to_metric, which names envoyproxy/ratelimit's metrics only, is
// read at any level, with or without a rate_limit, and changes nothing:
// the limits, their names and the keys are those of the file without it.
func TestValueToMetric(t *testing.T) {
	const with = `domain: vtm
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: user
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: tenant
    value_to_metric: false
    rate_limit: {unit: hour, requests_per_unit: 7}
`
	var lines []string
	for _, line := range strings.SplitAfter(with, "\n") {
		if !strings.Contains(line, "value_to_metric") {
			lines = append(lines, line)
		}
	}
	without := strings.Join(lines, "")
	var cs []*config.Config
	for _, text := range []string{with, without} {
		c, err := config.Parse("vtm.yaml", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	for _, es := range [][]config.Entry{d("route", "/a", "user", "ann"), d("tenant", "t1")} {
		l0, k0 := key(t, cs[0], "vtm", es)
		l1, k1 := key(t, cs[1], "vtm", es)
		if (l0 == nil) != (l1 == nil) || k0 != k1 || (l0 != nil && (l0.Name != l1.Name || l0.RequestsPerUnit != l1.RequestsPerUnit || l0.Unit != l1.Unit || l0.Shadow != l1.Shadow || l0.DetailedMetric != l1.DetailedMetric)) {
			t.Errorf("%v: with value_to_metric %+v key %q, without %+v key %q", es, l0, k0, l1, k1)
		}
	}
}
