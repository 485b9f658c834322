package otellimit

import (
	"os"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/admission"
)

// TestDocListsEveryOutcome: the package documentation's list of
// hotlimit.outcome values names every admission.Outcome, the outcomes of
// both hotlimit.http.requests and hotlimit.grpc.calls, so that a
// dashboard built from it misses none.
func TestDocListsEveryOutcome(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "hotlimit.outcome ")
	j := strings.Index(doc, "hotlimit.method_group ")
	if i < 0 || j < i {
		t.Fatal("doc.go: no hotlimit.outcome entry before hotlimit.method_group")
	}
	for o := range admission.Outcome(len(admission.GroupCounts{}.Counts)) {
		if !strings.Contains(doc[i:j], `"`+o.String()+`"`) {
			t.Errorf("doc.go's hotlimit.outcome does not list %q", o)
		}
	}
}
