package otellimit

import (
	"os"
	"strings"
	"testing"

	"github.com/hotlimit/hotlimit/grpclimit"
	"github.com/hotlimit/hotlimit/httplimit"
)

// TestDocListsEveryOutcome: the package documentation's list of
// hotlimit.outcome values names every httplimit and grpclimit Outcome, so
// that a dashboard built from it misses none.
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
	http, grpcList, ok := strings.Cut(doc[i:j], "hotlimit.grpc.calls")
	if !ok {
		t.Fatal("doc.go: the hotlimit.outcome entry has no hotlimit.grpc.calls part")
	}
	for o := range httplimit.OutcomeCount {
		if !strings.Contains(http, `"`+o.String()+`"`) {
			t.Errorf("doc.go's hotlimit.outcome does not list httplimit's %q", o)
		}
	}
	for o := range grpclimit.OutcomeCount {
		if !strings.Contains(grpcList, `"`+o.String()+`"`) {
			t.Errorf("doc.go's hotlimit.outcome does not list grpclimit's %q", o)
		}
	}
}
