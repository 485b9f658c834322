package config

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit"
	"gopkg.in/yaml.v3"
)

// render writes c back as YAML, one document per domain, in a canonical
// layout: fields in yaml.v3's order, rules sorted at each level except
// wildcards, which keep their file order (it decides matches) and come
// first. Parsing it gives the same rules at other lines.
func render(c *Config) []byte {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	for _, name := range c.Domains() {
		d := c.domains[name]
		if err := enc.Encode(map[string]any{"domain": name, "descriptors": renderLevel(&d.root)}); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

func renderLevel(n *node) []any {
	var out []any
	for _, w := range n.wild {
		out = append(out, renderRule(w.key, w.n.value, w.n))
	}
	for _, k := range slices.SortedFunc(maps.Keys(n.exact), func(a, b kv) int {
		return strings.Compare(a.key+"\x00"+a.value, b.key+"\x00"+b.value)
	}) {
		if !strings.HasSuffix(k.value, "*") {
			out = append(out, renderRule(k.key, k.value, n.exact[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(n.keyOnly)) {
		out = append(out, renderRule(k, "", n.keyOnly[k]))
	}
	return out
}

func renderRule(key, value string, n *node) map[string]any {
	r := map[string]any{"key": key}
	if value != "" {
		r["value"] = value
	}
	if n.share {
		r["share_threshold"] = true
	}
	if n.hasChildren() {
		r["descriptors"] = renderLevel(n)
	}
	l := n.limit
	if l == nil {
		return r
	}
	if l.Shadow {
		r["shadow_mode"] = true
	}
	if l.DetailedMetric {
		r["detailed_metric"] = true
	}
	rl := map[string]any{}
	if l.RuleName != "" {
		rl["name"] = l.RuleName
	}
	if len(l.Replaces) > 0 {
		var rs []any
		for _, s := range l.Replaces {
			rs = append(rs, map[string]any{"name": s})
		}
		rl["replaces"] = rs
	}
	switch {
	case l.Unlimited:
		rl["unlimited"] = true
	case l.Refuses():
		rl["unit"], rl["requests_per_unit"] = strings.ToUpper(l.Unit.String()), 0
	default:
		rl["unit"], rl["requests_per_unit"] = l.Unit.String(), l.RequestsPerUnit
		rl["algorithm"], rl["cost"] = l.Algorithm.String(), l.Cost
		if l.Burst > 0 {
			rl["burst"] = l.Burst
		}
	}
	r["rate_limit"] = rl
	return r
}

// probes returns descriptors that reach every rule of c's domain, with
// the values a rule's value, wildcard and key-only matches see.
func probes(d *domain) [][]Entry {
	var out [][]Entry
	var walk func(n *node, prefix []Entry)
	walk = func(n *node, prefix []Entry) {
		if len(out) > 200 || len(prefix) > 8 {
			return
		}
		visit := func(e Entry, child *node) {
			p := append(slices.Clone(prefix), e)
			out = append(out, p)
			walk(child, p)
		}
		for k, child := range n.exact {
			visit(Entry{k.key, k.value}, child)
			visit(Entry{k.key, k.value + "x"}, child)
		}
		for k, child := range n.keyOnly {
			visit(Entry{k, "other"}, child)
			visit(Entry{k, ""}, child)
		}
	}
	walk(&d.root, nil)
	return out
}

// limitsEqual reports whether two configs have the same limits by Name,
// with the same fields but for File and Line.
func limitsEqual(t *testing.T, a, b *Config) {
	t.Helper()
	if !reflect.DeepEqual(a.Limits(), b.Limits()) {
		t.Fatalf("Limits differ:\n%v\n%v", a.Limits(), b.Limits())
	}
	byName := func(c *Config) map[string]Limit {
		m := map[string]Limit{}
		for _, l := range c.All() {
			v := *l
			v.File, v.Line = "", 0
			m[l.Name] = v
		}
		return m
	}
	if x, y := byName(a), byName(b); !reflect.DeepEqual(x, y) {
		t.Fatalf("All differs:\n%+v\n%+v", x, y)
	}
}

// FuzzParse: Parse never panics; what it accepts is valid by hotlimit's
// rules, parses the same twice, and, written back in another layout,
// parses to the same limits (by Name) that match the same descriptors
// under the same keys.
func FuzzParse(f *testing.F) {
	for _, dir := range []string{"testdata/envoy", "."} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: 'v*'\n    share_threshold: true\n    descriptors: [{key: u, rate_limit: {unit: hour, requests_per_unit: 3, algorithm: leaky_bucket, burst: 2}}]\n"))
	f.Add([]byte("domain: d\ndescriptors: [{key: a, rate_limit: &r {unit: week, requests_per_unit: 9, algorithm: sliding_log, cost: 3}}, {key: b, rate_limit: *r}]\n---\ndomain: e\n"))
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n    bogus: [1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatal("a Config with an error")
			}
			if len(err.Error()) == 0 {
				t.Fatal("an empty error")
			}
			return
		}
		again, err := Parse("f.yaml", data)
		if err != nil {
			t.Fatalf("second parse: %v", err)
		}
		limitsEqual(t, c, again)
		names := map[string]bool{}
		for _, l := range c.All() {
			if names[l.Name] || l.Name == "" || strings.ContainsAny(l.Name, "{}") || l.Line <= 0 || l.File != "f.yaml" {
				t.Fatalf("limit %+v: Name twice or empty, or no place", l)
			}
			names[l.Name] = true
			if l.Policy != nil {
				info, err := hotlimit.Describe(l.Policy)
				if err != nil || l.Cost < 1 || l.Cost > info.Limit || l.Unlimited || l.Refuses() {
					t.Fatalf("limit %+v: %v", l, err)
				}
			} else if !l.Unlimited && !l.Refuses() {
				t.Fatalf("limit %+v: no Policy", l)
			}
		}
		out := render(c)
		back, err := Parse("g.yaml", out)
		if err != nil {
			t.Fatalf("written back:\n%s\ndoes not parse: %v", out, err)
		}
		limitsEqual(t, c, back)
		buf := make([]byte, 0, 256)
		for _, name := range c.Domains() {
			for _, es := range probes(c.domains[name]) {
				l1, k1, ok1 := c.Match(buf[:0], name, es)
				k1 = slices.Clone(k1)
				l2, k2, ok2 := back.Match(buf[:0], name, es)
				if ok1 != ok2 || !bytes.Equal(k1, k2) || (ok1 && l1.Name != l2.Name) {
					t.Fatalf("%s %v: %v %q %v, written back %v %q %v\n%s", name, es, ok1, k1, l1, ok2, k2, l2, out)
				}
			}
		}
	})
}
