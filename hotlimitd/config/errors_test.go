package config_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

// configErrors lists the *ErrConfig in err, in order.
func configErrors(t *testing.T, err error) []*config.ErrConfig {
	t.Helper()
	var out []*config.ErrConfig
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var ce *config.ErrConfig
		if !errors.As(err, &ce) {
			t.Fatalf("not an *ErrConfig: %T %v", err, err)
		}
		out = append(out, ce)
	}
	walk(err)
	return out
}

// wantErr is one expected error: its line, its field and a part of its
// message.
type wantErr struct {
	line  int
	field string
	msg   string
}

func TestParseErrors(t *testing.T) {
	const rl = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n" // rate_limit's fields start at line 5
	for _, tc := range []struct {
		name string
		yaml string
		want []wantErr
	}{
		{"empty file", "", []wantErr{{0, "", "no domain: the file is empty"}}},
		{"comments only", "# nothing\n", []wantErr{{0, "", "no domain"}}},
		{"not a mapping", "- a\n", []wantErr{{1, "", "want a mapping with domain and descriptors, got a list"}}},
		{"missing domain", "descriptors: []\n", []wantErr{{1, "domain", "missing"}}},
		{"empty domain", "domain: \"\"\n", []wantErr{{1, "domain", "empty"}}},
		{"null domain", "domain:\n", []wantErr{{1, "domain", "want a string, got nothing"}}},
		{"unknown top field", "domain: d\ndomian: x\n", []wantErr{{2, "domian", "unknown field"}}},
		{"field twice", "domain: d\ndomain: e\n", []wantErr{{2, "domain", "given twice (first at line 1)"}}},
		{"descriptors not a list", "domain: d\ndescriptors: 5\n", []wantErr{{2, "descriptors", "want a list of descriptors"}}},
		{"descriptor not a mapping", "domain: d\ndescriptors:\n  - k\n", []wantErr{{3, "descriptors[0]", "want a mapping"}}},
		{"missing key", "domain: d\ndescriptors:\n  - value: v\n", []wantErr{{3, "descriptors[0].key", "missing"}}},
		{"empty key", "domain: d\ndescriptors:\n  - key: ''\n", []wantErr{{3, "descriptors[0].key", "empty"}}},
		{"key a mapping", "domain: d\ndescriptors:\n  - key: {a: b}\n", []wantErr{{3, "descriptors[0].key", "want a string, got a mapping"}}},
		{"empty value", "domain: d\ndescriptors:\n  - key: k\n    value: ''\n", []wantErr{{4, "descriptors[0].value", "leave value out"}}},
		{"duplicate key and value", "domain: d\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n",
			[]wantErr{{6, "descriptors[1].value", `key "k" and value "v" is also at line 3`}}},
		{"duplicate key only", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n",
			[]wantErr{{4, "descriptors[1].key", `key "k" and no value is also at line 3`}}},
		{"duplicate nested", "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: k\n      - key: k\n",
			[]wantErr{{6, "descriptors[0].descriptors[1].key", "also at line 5"}}},
		{"bad value beside a key-only rule", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n    value: [v]\n",
			[]wantErr{{5, "descriptors[1].value", "want a string, got a list"}}},
		{"unknown descriptor field", "domain: d\ndescriptors:\n  - key: k\n    ratelimit: {}\n", []wantErr{{4, "descriptors[0].ratelimit", "unknown field"}}},
		{"value_to_metric not a bool", "domain: d\ndescriptors:\n  - key: k\n    value_to_metric: on\n", []wantErr{{4, "descriptors[0].value_to_metric", `want true or false, got "on"`}}},
		{"quota_mode", "domain: d\ndescriptors:\n  - key: k\n    quota_mode: true\n", []wantErr{{4, "descriptors[0].quota_mode", "not supported"}}},
		{"shadow_mode not a bool", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: yes\n    rate_limit: {unlimited: true}\n",
			[]wantErr{{4, "descriptors[0].shadow_mode", `want true or false, got "yes"`}}},
		{"shadow_mode without rate_limit", "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: true\n",
			[]wantErr{{4, "descriptors[0].shadow_mode", "no rate_limit here"}}},
		{"detailed_metric without rate_limit", "domain: d\ndescriptors:\n  - key: k\n    detailed_metric: true\n",
			[]wantErr{{4, "descriptors[0].detailed_metric", "no rate_limit here"}}},
		{"share_threshold without wildcard", "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n",
			[]wantErr{{5, "descriptors[0].share_threshold", "only for a wildcard value"}}},
		{"rate_limit null", rl, []wantErr{{4, "descriptors[0].rate_limit", "want a mapping (unit and requests_per_unit, or unlimited: true), got nothing"}}},
		{"missing unit and requests_per_unit", rl + "      name: n\n", []wantErr{
			{5, "descriptors[0].rate_limit.unit", "missing"},
			{5, "descriptors[0].rate_limit.requests_per_unit", "missing (0 refuses every hit)"}}},
		{"unknown unit", rl + "      unit: fortnight\n      requests_per_unit: 1\n",
			[]wantErr{{5, "descriptors[0].rate_limit.unit", `unknown unit "fortnight"`}}},
		{"negative requests_per_unit", rl + "      unit: second\n      requests_per_unit: -1\n",
			[]wantErr{{6, "descriptors[0].rate_limit.requests_per_unit", "want an integer from 0 to 4294967295, got \"-1\""}}},
		{"requests_per_unit too large", rl + "      unit: second\n      requests_per_unit: 4294967296\n",
			[]wantErr{{6, "descriptors[0].rate_limit.requests_per_unit", "from 0 to 4294967295"}}},
		{"requests_per_unit quoted", rl + "      unit: second\n      requests_per_unit: '5'\n",
			[]wantErr{{6, "descriptors[0].rate_limit.requests_per_unit", "want an integer"}}},
		{"requests_per_unit float", rl + "      unit: second\n      requests_per_unit: 5.5\n",
			[]wantErr{{6, "descriptors[0].rate_limit.requests_per_unit", "want an integer"}}},
		{"unlimited with unit and count", rl + "      unlimited: true\n      unit: second\n      requests_per_unit: 5\n", []wantErr{
			{6, "descriptors[0].rate_limit.unit", "not with unlimited: true"},
			{7, "descriptors[0].rate_limit.requests_per_unit", "not with unlimited: true"}}},
		{"unknown algorithm", rl + "      unit: second\n      requests_per_unit: 5\n      algorithm: gcra\n",
			[]wantErr{{7, "descriptors[0].rate_limit.algorithm", `unknown algorithm "gcra"`}}},
		{"concurrency", rl + "      unit: second\n      requests_per_unit: 5\n      algorithm: concurrency\n",
			[]wantErr{{7, "descriptors[0].rate_limit.algorithm", "no call to release"}}},
		{"misspelt algorithm and its burst", rl + "      unit: second\n      requests_per_unit: 5\n      algorithm: tokenbucket\n      burst: 10\n",
			[]wantErr{{7, "descriptors[0].rate_limit.algorithm", `unknown algorithm "tokenbucket"`}}},
		{"bad requests_per_unit and an algorithm", rl + "      unit: second\n      requests_per_unit: many\n      algorithm: token_bucket\n",
			[]wantErr{{6, "descriptors[0].rate_limit.requests_per_unit", "want an integer"}}},
		{"burst on a window", rl + "      unit: second\n      requests_per_unit: 5\n      burst: 10\n",
			[]wantErr{{7, "descriptors[0].rate_limit.burst", "only for token_bucket and leaky_bucket"}}},
		{"burst 0", rl + "      unit: second\n      requests_per_unit: 5\n      algorithm: token_bucket\n      burst: 0\n",
			[]wantErr{{8, "descriptors[0].rate_limit.burst", "want an integer from 1"}}},
		{"cost 0", rl + "      unit: second\n      requests_per_unit: 5\n      cost: 0\n",
			[]wantErr{{7, "descriptors[0].rate_limit.cost", "want an integer from 1"}}},
		{"cost above capacity", rl + "      unit: second\n      requests_per_unit: 5\n      cost: 6\n",
			[]wantErr{{7, "descriptors[0].rate_limit.cost", "6 exceeds the limit's capacity 5"}}},
		{"cost above a bucket's burst", rl + "      unit: second\n      requests_per_unit: 50\n      algorithm: token_bucket\n      burst: 5\n      cost: 6\n",
			[]wantErr{{9, "descriptors[0].rate_limit.cost", "capacity 5"}}},
		{"extensions with 0", rl + "      unit: second\n      requests_per_unit: 0\n      algorithm: token_bucket\n",
			[]wantErr{{7, "descriptors[0].rate_limit.algorithm", "requests_per_unit 0 refuses every hit"}}},
		{"hotlimit refuses the policy", rl + "      unit: second\n      requests_per_unit: 2000\n      algorithm: sliding_log\n",
			[]wantErr{{5, "descriptors[0].rate_limit", "sliding_log 2000 per second: hotlimit: SlidingLog.Limit 2000 exceeds MaxLogLimit"}}},
		{"hotlimit refuses the bucket", rl + "      unit: year\n      requests_per_unit: 1\n      algorithm: token_bucket\n      burst: 9223372036854775807\n",
			[]wantErr{{5, "descriptors[0].rate_limit", "hotlimit: TokenBucket.Burst"}}},
		{"unknown rate_limit field", rl + "      unit: second\n      requests_per_unit: 1\n      per: 1s\n",
			[]wantErr{{7, "descriptors[0].rate_limit.per", "unknown field"}}},
		{"replaces unknown name", rl + "      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: nope\n",
			[]wantErr{{8, "descriptors[0].rate_limit.replaces[0].name", `no rate_limit of domain "d" is named "nope"`}}},
		{"replaces itself", rl + "      name: me\n      unit: second\n      requests_per_unit: 1\n      replaces: [{name: me}]\n",
			[]wantErr{{5, "descriptors[0].rate_limit.replaces", `replaces its own name "me"`}}},
		{"replaces entry without name", rl + "      unit: second\n      requests_per_unit: 1\n      replaces: [{}]\n",
			[]wantErr{{7, "descriptors[0].rate_limit.replaces[0].name", "missing"}}},
		{"replaces not a list", rl + "      unit: second\n      requests_per_unit: 1\n      replaces: x\n",
			[]wantErr{{7, "descriptors[0].rate_limit.replaces", "want a list"}}},
		{"merge key", "domain: d\nbase: &b {key: k}\n", []wantErr{{2, "base", "unknown field"}}},
		{"merge key in a descriptor", "domain: d\ndescriptors:\n  - &b {key: k}\n  - <<: *b\n    value: v\n",
			[]wantErr{{4, "descriptors[1]", "merge keys (<<) are not supported"}, {4, "descriptors[1].key", "missing"}}},
		{"YAML syntax", "domain: d\ndescriptors:\n  - key: k\n   value: v\n", []wantErr{{2, "", "YAML: did not find expected '-' indicator"}}},
		{"null second document", "domain: d\n---\n~\n", []wantErr{{3, "", "empty YAML document: want a domain"}}},
		{"domain twice in one file", "domain: d\n---\ndomain: d\n", []wantErr{{3, "domain", `"d" is also at f.yaml:1`}}},
		{"every error of the file", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: eon, requests_per_unit: 1}\n  - key: b\n    bogus: 1\n  - value: c\n",
			[]wantErr{
				{4, "descriptors[0].rate_limit.unit", `unknown unit "eon"`},
				{6, "descriptors[1].bogus", "unknown field"},
				{7, "descriptors[2].key", "missing"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Parse("f.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("parsed: %v", c.Domains())
			}
			if c != nil {
				t.Error("a Config with an error")
			}
			got := configErrors(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(got), len(tc.want), err)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.File != "f.yaml" || g.Line != w.line || g.Field != w.field || !strings.Contains(g.Msg, w.msg) {
					t.Errorf("error %d: %q (line %d, field %q), want line %d, field %q, message with %q", i, g.Error(), g.Line, g.Field, w.line, w.field, w.msg)
				}
				wantText := "f.yaml"
				if w.line > 0 {
					wantText += fmt.Sprintf(":%d", w.line)
				}
				if w.field != "" {
					wantText += ": " + w.field
				}
				if !strings.HasPrefix(g.Error(), wantText+": ") {
					t.Errorf("error %d: %q does not start with %q", i, g.Error(), wantText+": ")
				}
			}
		})
	}
}

// Aliases that expand to more nodes than the parser visits are refused,
// quickly, not walked.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	// Level i is two rules whose children are both level i−1: 2^30
	// rules, in 30 lines.
	b.WriteString("domain: d\ndescriptors:\n  - key: bomb\n    descriptors: &a0 [{key: k}]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "  - key: x%d\n    descriptors: &a%d [{key: a, descriptors: *a%d}, {key: b, descriptors: *a%d}]\n", i, i, i-1, i-1)
	}
	_, err := config.Parse("f.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "YAML nodes (aliases expanded)") {
		t.Fatalf("err = %v", err)
	}
}

// Aliases within the budget work: a shared rate_limit block.
func TestAliases(t *testing.T) {
	c, err := config.Parse("f.yaml", []byte(`domain: d
descriptors:
  - key: a
    rate_limit: &std {unit: second, requests_per_unit: 7}
  - key: b
    rate_limit: *std
`))
	if err != nil {
		t.Fatal(err)
	}
	check(t, c, "d", d("a", "1"), want{rpu: 7, unit: config.Second})
	check(t, c, "d", d("b", "1"), want{rpu: 7, unit: config.Second})
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := config.Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("Load of a missing file")
	}
	if _, err := config.Load(dir); err == nil || !strings.Contains(err.Error(), "no *.yaml or *.yml file") {
		t.Errorf("Load of an empty directory: %v", err)
	}
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: d\n")
	writeFile(t, filepath.Join(dir, "b.yml"), "# b\ndomain: d\n")
	writeFile(t, filepath.Join(dir, "c.yaml"), "domain: e\ndescriptors: [{key: k, rate_limit: {unit: day}}]\n")
	writeFile(t, filepath.Join(dir, ".hidden.yaml"), "not: [valid\n")
	writeFile(t, filepath.Join(dir, "notes.txt"), "not: [valid\n")
	_, err := config.Load(dir)
	got := configErrors(t, err)
	want := []string{
		filepath.Join(dir, "b.yml") + ":2: domain: \"d\" is also at " + filepath.Join(dir, "a.yaml") + ":1",
		filepath.Join(dir, "c.yaml") + ":2: descriptors[0].rate_limit.requests_per_unit: missing (0 refuses every hit)",
	}
	if len(got) != len(want) {
		t.Fatalf("errors: %v", err)
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Errorf("error %d: %q, want %q", i, got[i].Error(), want[i])
		}
	}
}

// A file with very many errors reports the first 100 and says so, first.
func TestParseErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 150 {
		fmt.Fprintf(&b, "  - key: k%d\n    bogus: 1\n", i)
	}
	_, err := config.Parse("f.yaml", []byte(b.String()))
	got := configErrors(t, err)
	if len(got) != 101 || got[0].Msg != "more than 100 errors: the rest are not shown" || got[1].Line != 4 || got[100].Line != 202 {
		t.Fatalf("%d errors, the first two %v %v, the last %v", len(got), got[0], got[1], got[len(got)-1])
	}
}

// Load skips subdirectories, even named *.yaml, and dot files.
func TestLoadSkips(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: d\n")
	if err := os.Mkdir(filepath.Join(dir, "sub.yaml"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "sub.yaml", "b.yaml"), "domain: d\n")
	writeFile(t, filepath.Join(dir, ".c.yaml"), "domain: d\n")
	c, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Domains(); len(got) != 1 || got[0] != "d" {
		t.Errorf("Domains: %v", got)
	}
}
