package config_test

import (
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/hotlimitd/config"
)

// TestEmptyDocuments: a document with nothing in it (a file ending in
// "---", a document of comments only) is skipped, as
// envoyproxy/ratelimit loads such a file; a file with nothing else has
// no domain, and a document holding an explicit null is refused.
func TestEmptyDocuments(t *testing.T) {
	for _, data := range []string{
		"domain: d\n---\n",
		"---\ndomain: d\n",
		"# the limits of d\n---\ndomain: d\n---\n# end\n",
	} {
		c, err := config.Parse("f.yaml", []byte(data))
		if err != nil {
			t.Errorf("%q: %v", data, err)
			continue
		}
		if !c.HasDomain("d") {
			t.Errorf("%q: no domain d", data)
		}
	}
	for data, want := range map[string]string{
		"---\n":                 "no domain: the file is empty",
		"---\n---\n# nothing\n": "no domain: the file is empty",
		"domain: d\n---\n~\n":   "empty YAML document: want a domain",
	} {
		if _, err := config.Parse("f.yaml", []byte(data)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", data, err, want)
		}
	}
}
