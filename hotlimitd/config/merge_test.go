package config_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

const mergeA = `domain: d
descriptors:
  - key: user
    rate_limit:
      name: users
      unit: minute
      requests_per_unit: 3
`

const mergeB = `domain: d
descriptors:
  - key: path
    value: /a
    rate_limit:
      unit: minute
      requests_per_unit: 2
      replaces:
        - name: users
`

// allNames returns c's limits' Names, in order.
func allNames(c *config.Config) []string {
	var out []string
	for _, l := range c.All() {
		out = append(out, l.Name)
	}
	return out
}

// TestMergeDomains: with MergeDomains, the files of a directory that
// share a domain are that domain, as one file holding them all (the same
// limits, the same Names, a replaces across files); without it they are
// refused. A rule given twice across files is an error naming both.
func TestMergeDomains(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), mergeA)
	writeFile(t, filepath.Join(dir, "b.yaml"), mergeB)
	if _, err := config.Load(dir); err == nil || !strings.Contains(err.Error(), `"d" is also at`) {
		t.Fatalf("without MergeDomains: %v", err)
	}
	merged, err := config.Load(dir, config.MergeDomains())
	if err != nil {
		t.Fatal(err)
	}
	one, err := config.Parse("one.yaml", []byte(mergeA+strings.TrimPrefix(mergeB, "domain: d\ndescriptors:\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := allNames(merged), allNames(one); !slices.Equal(got, want) || len(got) != 2 {
		t.Fatalf("merged Names %q, one file's %q", got, want)
	}
	for _, e := range [][]config.Entry{{{Key: "user", Value: "x"}}, {{Key: "path", Value: "/a"}}} {
		l, _, ok := merged.Match(nil, "d", e)
		if !ok || filepath.Base(l.File) != map[string]string{"user": "a.yaml", "path": "b.yaml"}[e[0].Key] {
			t.Errorf("%v: %v %v", e, l, ok)
		}
	}

	// The same rule in a third file: an error naming both files.
	writeFile(t, filepath.Join(dir, "c.yaml"), "domain: d\ndescriptors:\n  - key: path\n    value: /a\n    rate_limit: {unit: hour, requests_per_unit: 1}\n")
	_, err = config.Load(dir, config.MergeDomains())
	if err == nil || !strings.Contains(err.Error(), "c.yaml:4: descriptors[0].value: ") || !strings.Contains(err.Error(), "also at "+filepath.Join(dir, "b.yaml")+":3") {
		t.Fatalf("a rule in two files: %v", err)
	}
	// A replaces that no file's rule answers.
	writeFile(t, filepath.Join(dir, "c.yaml"), "domain: d\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: hour\n      requests_per_unit: 1\n      replaces: [{name: nobody}]\n")
	if _, err = config.Load(dir, config.MergeDomains()); err == nil || !strings.Contains(err.Error(), `c.yaml:7: descriptors[0].rate_limit.replaces[0].name: no rate_limit of domain "d" is named "nobody"`) {
		t.Fatalf("a replaces of nothing: %v", err)
	}
}

// TestMergeDomainsWatcher: a Watcher with MergeDomains reloads the
// merged domain, and keeps the running configuration when a file adds a
// rule another already has.
func TestMergeDomainsWatcher(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), mergeA)
	w, err := config.NewWatcher(dir, time.Hour, nil, nil, config.MergeDomains())
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "b.yaml"), mergeB)
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	running := w.Current()
	if len(running.All()) != 2 {
		t.Fatalf("after adding b.yaml: %q", allNames(running))
	}
	writeFile(t, filepath.Join(dir, "c.yaml"), mergeA)
	if err := w.Reload(); err == nil || !strings.Contains(err.Error(), "also at "+filepath.Join(dir, "a.yaml")) {
		t.Fatalf("a duplicate rule: %v", err)
	}
	if w.Current() != running {
		t.Fatal("a refused load replaced the running configuration")
	}
}
