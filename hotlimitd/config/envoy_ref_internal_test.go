package config

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// refRule is a rule as envoyproxy/ratelimit's config_impl.go holds it: the
// children by their composite key ("key" or "key_value"), the composite
// keys ending in * of this level in file order, and the limit (here its
// requests_per_unit, 0 for none). The reference below is a plain reading
// of its GetLimit, written for this test, and valid while no key or value
// holds '_' (the composite keys are then unambiguous).
type refRule struct {
	children     map[string]*refRule
	wildcardKeys []string
	limit        int
}

func refMatch(root *refRule, entries []Entry) int {
	found := 0
	m, prev := root.children, root
	for i, e := range entries {
		final := e.Key + "_" + e.Value
		next := m[final]
		if next == nil {
			for _, w := range prev.wildcardKeys {
				if strings.HasPrefix(final, strings.TrimSuffix(w, "*")) {
					next = m[w]
					break
				}
			}
		}
		if next == nil {
			next = m[e.Key]
		}
		if next != nil && next.limit != 0 && i == len(entries)-1 {
			found = next.limit
		}
		if next == nil || len(next.children) == 0 {
			break
		}
		m, prev = next.children, next
	}
	return found
}

// genRules draws a tree of rules from data: keys from {a, b, c}; values
// none, x, y, xy, x*, * (wildcards included); each rule's limit, when it
// has one, a requests_per_unit no other rule has. It returns the YAML and
// the reference tree; duplicates at a level are skipped in both.
type gen struct {
	data []byte
	next int // the next requests_per_unit
}

func (g *gen) byte() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

var (
	genKeys   = []string{"a", "b", "c"}
	genValues = []string{"", "x", "y", "xy", "x*", "*"}
)

func (g *gen) level(depth int, ref *refRule) []any {
	n := int(g.byte() % 4)
	if depth == 0 {
		n++ // at least one rule
	}
	var out []any
	for range n {
		b := g.byte()
		key, value := genKeys[int(b)%3], genValues[int(b/3)%6]
		final := key
		if value != "" {
			final += "_" + value
		}
		if ref.children[final] != nil {
			continue
		}
		child := &refRule{children: map[string]*refRule{}}
		ref.children[final] = child
		if strings.HasSuffix(final, "*") {
			ref.wildcardKeys = append(ref.wildcardKeys, final)
		}
		r := map[string]any{"key": key}
		if value != "" {
			r["value"] = value
		}
		if b&0x80 != 0 || depth == 2 {
			g.next++
			child.limit = g.next
			r["rate_limit"] = map[string]any{"unit": "second", "requests_per_unit": g.next}
		}
		if depth < 2 && g.byte()%2 == 1 {
			if kids := g.level(depth+1, child); len(kids) > 0 {
				r["descriptors"] = kids
			}
		}
		out = append(out, r)
	}
	return out
}

// FuzzMatchEnvoy: Match picks the same rule as envoyproxy/ratelimit's
// GetLimit for every descriptor over a small alphabet, on trees of rules
// drawn from the input (wildcards, key-only rules, nesting, rules without
// limits or without children).
func FuzzMatchEnvoy(f *testing.F) {
	f.Add([]byte{0x81, 1, 0x84, 0x85, 0x00, 0x8d, 0x12, 0x33, 0x9f})
	f.Add([]byte("\x03\x8c\x01\x02\x84\x01\x03\x0f\x90\x91\x92\x93\x94\x95"))
	f.Add([]byte("rules and descriptors from these bytes"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := &gen{data: data}
		ref := &refRule{children: map[string]*refRule{}}
		rules := g.level(0, ref)
		out, err := yaml.Marshal(map[string]any{"domain": "d", "descriptors": rules})
		if err != nil {
			t.Fatal(err)
		}
		c, err := Parse("f.yaml", out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		// Every descriptor of up to 3 entries over the alphabet, plus
		// values the rules do not name.
		values := []string{"", "x", "y", "xy", "x*", "*", "xz", "z"}
		var walk func(prefix []Entry)
		walk = func(prefix []Entry) {
			if len(prefix) > 0 {
				want := refMatch(ref, prefix)
				l, _, ok := c.Match(nil, "d", prefix)
				got := 0
				if ok {
					got = int(l.RequestsPerUnit)
				}
				if got != want {
					t.Fatalf("%v: Match picked the rule of limit %d, envoyproxy/ratelimit's %d\n%s", prefix, got, want, out)
				}
			}
			if len(prefix) == 3 {
				return
			}
			for _, k := range genKeys {
				for _, v := range values {
					walk(append(prefix[:len(prefix):len(prefix)], Entry{k, v}))
				}
			}
		}
		walk(nil)
	})
}
