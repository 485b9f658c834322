package hotlimit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestUnsafeUses holds the package's uses of package unsafe to the list
// bytes.go gives: a new use fails here until that list names it.
func TestUnsafeUses(t *testing.T) {
	want := map[string][]string{
		"bytes.go":    {"SliceData", "String"},
		"memstats.go": {"Sizeof"},
		"tally.go":    {"Pointer"},
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		local := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"unsafe"` {
				local = "unsafe"
				if imp.Name != nil {
					local = imp.Name.Name
				}
			}
		}
		if local == "" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && !slices.Contains(got[name], sel.Sel.Name) {
					got[name] = append(got[name], sel.Sel.Name)
				}
			}
			return true
		})
		slices.Sort(got[name])
		if got[name] == nil {
			got[name] = []string{}
		}
	}
	for name, uses := range got {
		if !slices.Equal(uses, want[name]) {
			t.Errorf("%s uses unsafe.%v; bytes.go's list of the package's unsafe code says %v", name, uses, want[name])
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s no longer imports unsafe: drop it from bytes.go's list", name)
		}
	}
}
