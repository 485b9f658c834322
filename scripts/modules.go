//go:build ignore

// Command modules lists, checks and versions the repository's Go modules:
// the root module and every nested one, found by their go.mod files (so a
// new module is covered as soon as it exists).
//
//	GOWORK=off go run scripts/modules.go list              one line per module: directory, module path
//	GOWORK=off go run scripts/modules.go check             the rules below; exit 1 naming each break
//	GOWORK=off go run scripts/modules.go require VERSION   make every module require its siblings at VERSION
//
// Run it from the repository root. The rules check enforces:
//
//   - a module's path is the root module's path followed by its directory,
//     which is what lets a tag "DIR/vX.Y.Z" version it;
//   - go.work uses exactly the repository's modules, so a nested module builds
//     against the tree in development, except a module whose directory
//     holds a go.work of its own (a benchmark harness whose dependencies
//     nothing else should build): the root go.work leaves it out, and its
//     own go.work uses it alone;
//   - the root go.work replaces every module that a module of the workspace
//     requires, at the version required, with its directory: in a
//     workspace the go command still reads the go.mod of a module at each
//     version another requires (hotlimitd requires otellimit v0.1.0, and
//     carries no replace), which no proxy serves before the release;
//   - every requirement of one module on another names the same version (the
//     one the next release tags), never a placeholder such as v0.0.0 that no
//     proxy can serve;
//   - a replace directive for a sibling points at that sibling's directory.
//     Such replaces serve `go mod tidy` inside the module, which ignores go.work;
//     the go command ignores them when the module is a dependency;
//   - a module with a command (a main package outside examples/, in a
//     module outside bench/ and */bench/, whose programs run from the tree)
//     has no replace directives, which `go install PKG@VERSION` refuses; it
//     builds against the tree through go.work;
//   - a module's go directive is the oldest Go it needs, in x.y.0 form,
//     because it is a promise to consumers (`go get` raises a consumer's
//     go line to it): never lower than a requirement's go line (the go
//     command would refuse the module), and higher only with a comment on
//     the line above it that says which language feature or standard
//     library API needs it (go vet's stdversion analysis, which scripts/check
//     runs, then holds the module's code to that version); no toolchain
//     line, which would make a development machine with an older Go fetch
//     a toolchain; docs/modules.md's table states every module's minimum Go
//     as its go.mod does, and README.md the root module's ("needs Go 1.25
//     or later");
//   - the root package's documentation (doc.go) names every nested module
//     in its map of the modules.
//
// It uses only the standard library and the go command.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// module is one go.mod found under the repository root.
type module struct {
	Dir  string // slash-separated, relative to the root; "." for the root module
	Path string // the module path its go.mod declares
	Mod  goMod
}

// goMod is the part of `go mod edit -json`'s output used here.
type goMod struct {
	Module    struct{ Path string }
	Go        string
	Toolchain string
	Require   []struct {
		Path    string
		Version string
	}
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

// goWork is the part of `go work edit -json`'s output used here.
type goWork struct {
	Use     []struct{ DiskPath string }
	Replace []struct {
		Old struct{ Path, Version string }
		New struct{ Path, Version string }
	}
}

// semver is a release version the go command accepts for a v0 or v1 module:
// vMAJOR.MINOR.PATCH with an optional pre-release suffix.
var semver = regexp.MustCompile(`^v[01]\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mods, err := find(".")
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "list":
		for _, m := range mods {
			fmt.Printf("%s\t%s\n", m.Dir, m.Path)
		}
	case "check":
		problems := check(mods)
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "modules:", p)
		}
		if len(problems) > 0 {
			os.Exit(1)
		}
		fmt.Printf("modules: %d modules, go.work and requirements consistent\n", len(mods))
	case "require":
		if len(os.Args) != 3 {
			usage()
		}
		if err := require(mods, os.Args[2]); err != nil {
			fail(err)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: GOWORK=off go run scripts/modules.go list | check | require VERSION")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "modules:", err)
	os.Exit(1)
}

// find walks root for go.mod files, skipping what the go command skips in
// "./..." patterns (directories named testdata or starting with . or _),
// and returns the modules sorted by directory, the root first.
func find(root string) ([]module, error) {
	var mods []module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && skipped(name) {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "go.mod" {
			return nil
		}
		var mod goMod
		if err := goJSON(&mod, "mod", "edit", "-json", p); err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(p))
		mods = append(mods, module{Dir: dir, Path: mod.Module.Path, Mod: mod})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Dir < mods[j].Dir })
	if len(mods) == 0 || mods[0].Dir != "." {
		return nil, fmt.Errorf("no go.mod at the repository root (run from the root)")
	}
	return mods, nil
}

// skipped reports whether the go command skips a directory of this name
// in "./..." patterns.
func skipped(name string) bool {
	return name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// commands returns the directories of m's main packages that users install,
// relative to the repository root: none in a module under examples/ or
// bench/ (their programs run from the tree), and none in an examples/
// directory or in a module nested in m.
func commands(m module, mods []module) ([]string, error) {
	segs := strings.Split(m.Dir, "/")
	if slices.Contains(segs, "examples") || slices.Contains(segs, "bench") {
		return nil, nil
	}
	nested := nestedIn(m, mods)
	seen := map[string]bool{}
	var dirs []string
	err := filepath.WalkDir(m.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		p = filepath.ToSlash(p)
		if d.IsDir() {
			if p != m.Dir && (nested[p] || d.Name() == "examples" || skipped(d.Name())) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || seen[path.Dir(p)] {
			return nil
		}
		main, err := isMain(p)
		if main {
			seen[path.Dir(p)] = true
			dirs = append(dirs, path.Dir(p))
		}
		return err
	})
	return dirs, err
}

// nestedIn returns the directories of the modules nested in m.
func nestedIn(m module, mods []module) map[string]bool {
	nested := map[string]bool{}
	for _, o := range mods {
		if o.Dir != m.Dir && (m.Dir == "." || strings.HasPrefix(o.Dir, m.Dir+"/")) {
			nested[o.Dir] = true
		}
	}
	return nested
}

// isMain reports whether the Go file at p is in package main.
func isMain(p string) (bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.PackageClauseOnly)
	if err != nil {
		return false, err
	}
	return f.Name.Name == "main", nil
}

// check returns every break of the rules in the package comment.
func check(mods []module) []string {
	problems, byPath := checkPaths(mods)
	own, more := ownWorkspaces(mods)
	problems = append(problems, more...)
	problems = append(problems, checkRootWork(mods, own, byPath)...)
	problems = append(problems, checkVersions(mods, byPath)...)
	problems = append(problems, checkGo(mods, byPath)...)
	problems = append(problems, checkDocMap(mods)...)
	return append(problems, checkReplaces(mods, byPath)...)
}

// checkPaths returns the modules whose path is not the root module's
// followed by their directory, and the modules by path.
func checkPaths(mods []module) ([]string, map[string]module) {
	var problems []string
	rootPath := mods[0].Path
	byPath := map[string]module{}
	for _, m := range mods {
		want := rootPath
		if m.Dir != "." {
			want = rootPath + "/" + m.Dir
		}
		if m.Path != want {
			problems = append(problems, fmt.Sprintf("%s/go.mod declares module %s; a module in %s must be %s, or the tag %s/vX.Y.Z cannot version it", m.Dir, m.Path, m.Dir, want, m.Dir))
		}
		byPath[m.Path] = m
	}
	return problems, byPath
}

// ownWorkspaces returns the directories of the nested modules that are
// workspaces of their own (they hold a go.work), and the breaks of the
// rule that such a go.work uses its module alone.
func ownWorkspaces(mods []module) (map[string]bool, []string) {
	var problems []string
	own := map[string]bool{}
	for _, m := range mods[1:] {
		if _, err := os.Stat(filepath.Join(m.Dir, "go.work")); err != nil {
			continue
		}
		own[m.Dir] = true
		var w goWork
		if err := goJSON(&w, "work", "edit", "-json", filepath.Join(m.Dir, "go.work")); err != nil {
			problems = append(problems, err.Error())
			continue
		}
		if len(w.Use) != 1 || filepath.Clean(w.Use[0].DiskPath) != "." {
			var uses []string
			for _, u := range w.Use {
				uses = append(uses, u.DiskPath)
			}
			problems = append(problems, fmt.Sprintf("%s/go.work uses %v: a module's own workspace uses the module alone (use .), its siblings coming from its replace directives", m.Dir, uses))
		}
	}
	return own, problems
}

// checkRootWork returns the breaks of the rules on the root go.work: it
// uses exactly the modules, less those that are workspaces of their own
// (own), and replaces what they require (checkWorkReplaces).
func checkRootWork(mods []module, own map[string]bool, byPath map[string]module) []string {
	if _, err := os.Stat("go.work"); err != nil {
		return []string{"no go.work at the root: nested modules would build against published versions, not the tree (go work init, then go work use for each module)"}
	}
	var work goWork
	if err := goJSON(&work, "work", "edit", "-json", "go.work"); err != nil {
		return []string{err.Error()}
	}
	var problems []string
	used := map[string]bool{}
	for _, u := range work.Use {
		used[filepath.ToSlash(filepath.Clean(u.DiskPath))] = true
	}
	for _, m := range mods {
		switch {
		case own[m.Dir] && used[m.Dir]:
			problems = append(problems, fmt.Sprintf("go.work uses %s, which is a workspace of its own (%s/go.work): run `go work edit -dropuse=./%s` at the root, or delete %s/go.work", m.Dir, m.Dir, m.Dir, m.Dir))
		case !own[m.Dir] && !used[m.Dir]:
			problems = append(problems, fmt.Sprintf("go.work does not use %s: run `go work use ./%s` at the root", m.Dir, m.Dir))
		}
		delete(used, m.Dir)
	}
	for dir := range used {
		problems = append(problems, fmt.Sprintf("go.work uses %s, which holds no module of this repository: run `go work edit -dropuse=%s`", dir, dir))
	}
	return append(problems, checkWorkReplaces(mods, own, byPath, work)...)
}

// checkVersions returns the breaks of the rule that every requirement of
// one module on another names the same version, one a release can tag.
func checkVersions(mods []module, byPath map[string]module) []string {
	var problems []string
	versions := map[string][]string{} // version -> "dir requires path"
	for _, m := range mods {
		for _, r := range m.Mod.Require {
			if _, ok := byPath[r.Path]; ok {
				versions[r.Version] = append(versions[r.Version], m.Dir+"/go.mod requires "+r.Path+" "+r.Version)
			}
		}
	}
	if len(versions) > 1 {
		var lines []string
		for _, v := range sortedKeys(versions) {
			lines = append(lines, versions[v]...)
		}
		problems = append(problems, "the modules require their siblings at different versions (GOWORK=off go run scripts/modules.go require VERSION sets one):\n\t"+strings.Join(lines, "\n\t"))
	}
	for _, v := range sortedKeys(versions) {
		where := versions[v]
		if !semver.MatchString(v) || v == "v0.0.0" {
			problems = append(problems, fmt.Sprintf("%s: %s is not a version a release can tag (want vX.Y.Z with X 0 or 1, not v0.0.0)", where[0], v))
		}
	}
	return problems
}

// checkDocMap returns the nested modules that doc.go's map of the modules
// does not name.
func checkDocMap(mods []module) []string {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, m := range mods[1:] {
		if !regexp.MustCompile(`(?m)^//.*\b` + regexp.QuoteMeta(m.Path) + `\b`).Match(doc) {
			problems = append(problems, fmt.Sprintf("doc.go's map of the modules does not name %s", m.Path))
		}
	}
	return problems
}

// checkReplaces returns the breaks of the rules on replace directives:
// a module with commands has none, and a sibling's points at its
// directory.
func checkReplaces(mods []module, byPath map[string]module) []string {
	var problems []string
	for _, m := range mods {
		if len(m.Mod.Replace) > 0 {
			cmds, err := commands(m, mods)
			if err != nil {
				problems = append(problems, err.Error())
			} else if len(cmds) > 0 {
				problems = append(problems, fmt.Sprintf("%s/go.mod has replace directives, and the module has commands (%s): `go install PKG@VERSION` would refuse them; drop the replaces (the module builds against the tree through go.work)", m.Dir, strings.Join(cmds, ", ")))
			}
		}
		for _, r := range m.Mod.Replace {
			target, ok := byPath[r.Old.Path]
			if !ok {
				continue
			}
			got := filepath.ToSlash(filepath.Clean(filepath.Join(m.Dir, r.New.Path)))
			if r.New.Version != "" || got != target.Dir {
				problems = append(problems, fmt.Sprintf("%s/go.mod replaces %s with %s; it must point at that module's directory, %s/", m.Dir, r.Old.Path, strings.TrimSpace(r.New.Path+" "+r.New.Version), target.Dir))
			}
		}
	}
	return problems
}

// goVersion is an x.y.0 go directive.
var goVersion = regexp.MustCompile(`^1\.(0|[1-9][0-9]*)\.0$`)

// modulesDoc is the page whose table states each module's minimum Go.
const modulesDoc = "docs/modules.md"

// checkGo returns the breaks of the go-directive rules in the package
// comment. A requirement's go line comes from `go list -m` (the module
// cache, or the configured proxy), a sibling's from its go.mod in the tree.
func checkGo(mods []module, byPath map[string]module) []string {
	var problems []string
	doc, err := os.ReadFile(modulesDoc)
	if err != nil {
		problems = append(problems, err.Error())
	}
	for _, m := range mods {
		gomod := filepath.Join(m.Dir, "go.mod")
		if !goVersion.MatchString(m.Mod.Go) {
			problems = append(problems, fmt.Sprintf("%s: go %s: the go directive must be an x.y.0 version, the oldest Go the module needs (a patch release only says which Go built it)", gomod, m.Mod.Go))
			continue
		}
		if m.Mod.Toolchain != "" {
			problems = append(problems, fmt.Sprintf("%s: toolchain %s: drop it (go mod edit -toolchain=none); the go directive alone says which Go the module needs", gomod, m.Mod.Toolchain))
		}
		need, from, err := requiredGo(m, byPath)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: reading its requirements' go lines: %v", gomod, err))
			continue
		}
		switch c := compareGo(m.Mod.Go, need); {
		case c < 0:
			problems = append(problems, fmt.Sprintf("%s: go %s, but it requires %s, whose go line is %s: raise it to %s (go mod edit -go=%s)", gomod, m.Mod.Go, from, need, roundGo(need), roundGo(need)))
		case c > 0 && compareGo(m.Mod.Go, roundGo(need)) > 0:
			if why := goComment(gomod); why == "" {
				problems = append(problems, fmt.Sprintf("%s: go %s, above the %s its requirements need: lower it, or say on the line above it which language feature or API needs it", gomod, m.Mod.Go, roundGo(need)))
			}
		}
		problems = append(problems, checkGoDocs(m, doc)...)
	}
	return problems
}

// requiredGo returns the highest go line of m's requirements (1.0.0 for
// none) and the requirement it is from.
func requiredGo(m module, byPath map[string]module) (need, from string, err error) {
	need = "1.0.0"
	var query []string
	for _, r := range m.Mod.Require {
		if sib, ok := byPath[r.Path]; ok {
			if compareGo(sib.Mod.Go, need) > 0 {
				need, from = sib.Mod.Go, r.Path
			}
			continue
		}
		query = append(query, r.Path+"@"+r.Version)
	}
	if len(query) == 0 {
		return need, from, nil
	}
	out, err := goOutput(os.TempDir(), append([]string{"list", "-m", "-f", "{{.Path}} {{.GoVersion}}"}, query...)...)
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		path, v, _ := strings.Cut(line, " ")
		if v != "" && compareGo(v, need) > 0 {
			need, from = v, path
		}
	}
	return need, from, nil
}

// checkGoDocs returns where the docs disagree with m's go directive: the
// README for the root module, and the row of docs/modules.md's table
// (doc, nil when it could not be read) for every module.
func checkGoDocs(m module, doc []byte) []string {
	var problems []string
	if m.Dir == "." {
		readme, err := os.ReadFile("README.md")
		want := "needs Go " + strings.TrimSuffix(m.Mod.Go, ".0") + " or\nlater"
		if err != nil || !bytes.Contains(bytes.ReplaceAll(readme, []byte(" "), []byte("\n")), []byte(strings.ReplaceAll(want, " ", "\n"))) {
			problems = append(problems, fmt.Sprintf("README.md does not say that the root module %q (its go.mod says go %s)", strings.ReplaceAll(want, "\n", " "), m.Mod.Go))
		}
	}
	if doc == nil {
		return problems
	}
	// docs/modules.md: | `DIR/` | `PATH` | needs | Go |, found by PATH
	row := regexp.MustCompile("(?m)^\\| [^|]* \\| `" + regexp.QuoteMeta(m.Path) + "` \\|.*\\| ([0-9.]+) \\|$").FindSubmatch(doc)
	switch {
	case row == nil:
		problems = append(problems, fmt.Sprintf("%s has no row for %s/ ending in its minimum Go (%s)", modulesDoc, m.Dir, m.Mod.Go))
	case string(row[1]) != m.Mod.Go:
		problems = append(problems, fmt.Sprintf("%s says %s/ needs Go %s; its go.mod says go %s", modulesDoc, m.Dir, row[1], m.Mod.Go))
	}
	return problems
}

// compareGo compares two Go versions (1.22, 1.22.0, 1.26.8) numerically.
func compareGo(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < 3; i++ {
		var x, y int
		if i < len(as) {
			fmt.Sscan(as[i], &x)
		}
		if i < len(bs) {
			fmt.Sscan(bs[i], &y)
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// roundGo is the x.y.0 release at or above v (1.24 -> 1.24.0, 1.24.3 -> 1.25.0).
func roundGo(v string) string {
	p := strings.Split(v, ".")
	for len(p) < 3 {
		p = append(p, "0")
	}
	if p[2] != "0" {
		var minor int
		fmt.Sscan(p[1], &minor)
		p[1] = fmt.Sprint(minor + 1)
	}
	return p[0] + "." + p[1] + ".0"
}

// goComment returns the comment on the line above gomod's go directive.
func goComment(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "go ") && i > 0 {
			if c, ok := strings.CutPrefix(strings.TrimSpace(lines[i-1]), "//"); ok {
				return strings.TrimSpace(c)
			}
			return ""
		}
	}
	return ""
}

// checkWorkReplaces reports what is missing from or extra in the root
// go.work's replaces: one for each module of the workspace at each
// version a module of the workspace requires it, with its directory.
func checkWorkReplaces(mods []module, own map[string]bool, byPath map[string]module, work goWork) []string {
	var problems []string
	want := map[string]string{} // "path version" -> "./dir"
	for _, m := range mods {
		if own[m.Dir] {
			continue
		}
		for _, r := range m.Mod.Require {
			if dep, ok := byPath[r.Path]; ok && !own[dep.Dir] {
				want[r.Path+" "+r.Version] = strings.TrimSuffix("./"+dep.Dir, ".")
			}
		}
	}
	for _, r := range work.Replace {
		if _, ok := byPath[r.Old.Path]; !ok {
			continue
		}
		k := r.Old.Path + " " + r.Old.Version
		dir, ok := want[k]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("go.work replaces %s %s, which no module of the workspace requires: run `go work edit -dropreplace=%s@%s`", r.Old.Path, r.Old.Version, r.Old.Path, r.Old.Version))
		case r.New.Version != "" || filepath.Clean(r.New.Path) != filepath.Clean(dir):
			problems = append(problems, fmt.Sprintf("go.work replaces %s %s with %s, not its directory %s", r.Old.Path, r.Old.Version, r.New.Path, dir))
		}
		delete(want, k)
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		path, version, _ := strings.Cut(k, " ")
		problems = append(problems, fmt.Sprintf("go.work does not replace %s %s, which a module of the workspace requires, with its directory: the go command would fetch it; run `go work edit -replace=%s@%s=%s` at the root", path, version, path, version, want[k]))
	}
	return problems
}

// require makes every module's requirements on its siblings name version.
func require(mods []module, version string) error {
	if !semver.MatchString(version) {
		return fmt.Errorf("%q is not vX.Y.Z[-pre] with X 0 or 1 (v2 and later need a /v2 module path)", version)
	}
	byPath := map[string]bool{}
	for _, m := range mods {
		byPath[m.Path] = true
	}
	for _, m := range mods {
		args := []string{"mod", "edit"}
		for _, r := range m.Mod.Require {
			if byPath[r.Path] && r.Version != version {
				args = append(args, "-require="+r.Path+"@"+version)
			}
		}
		if len(args) == 2 {
			continue
		}
		args = append(args, filepath.Join(m.Dir, "go.mod"))
		cmd := exec.Command("go", args...)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s: %v", strings.Join(args, " "), err)
		}
		fmt.Printf("%s/go.mod: siblings required at %s\n", m.Dir, version)
	}
	// The root go.work's replaces follow the requirements. Edited as text,
	// since go work edit would drop the file's comments and layout.
	var work goWork
	if err := goJSON(&work, "work", "edit", "-json", "go.work"); err != nil {
		return err
	}
	text, err := os.ReadFile("go.work")
	if err != nil {
		return err
	}
	edited := text
	for _, r := range work.Replace {
		if byPath[r.Old.Path] && r.Old.Version != "" && r.Old.Version != version {
			line := regexp.MustCompile(`(?m)^(\s*(?:replace\s+)?` + regexp.QuoteMeta(r.Old.Path) + `\s+)` + regexp.QuoteMeta(r.Old.Version) + `(\s+=>)`)
			edited = line.ReplaceAll(edited, []byte("${1}"+version+"${2}"))
		}
	}
	if bytes.Equal(edited, text) {
		return nil
	}
	if err := os.WriteFile("go.work", edited, 0o644); err != nil {
		return err
	}
	fmt.Printf("go.work: siblings replaced at %s\n", version)
	return nil
}

// goOutput runs the go command in dir with GOWORK=off and returns its
// standard output.
func goOutput(dir string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// goJSON runs the go command with args and decodes its JSON output into v.
func goJSON(v any, args ...string) error {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return json.Unmarshal(stdout.Bytes(), v)
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
