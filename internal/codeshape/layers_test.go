package codeshape

import (
	"go/build/constraint"
	"go/parser"
	"go/token"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Layers orders the module's packages, lowest first: a product file may
// import a package of a lower layer only, and of its own layer only in
// the libraries. The order is the read-in-this-order path of
// CONTRIBUTING.md: the pod side (PID 1) beside the executor side, each on
// the libraries; the executor side from a job's calls on its pod (no
// Kubernetes types: what a per-call process needs) through the claim to
// the drivers; commands on top. A package not listed fails the test: a new
// package is placed on purpose.
var Layers = []struct {
	Name string
	Pkgs []string // paths relative to the module; "x/..." is x and below it
}{
	{"libraries", []string{"internal/...", "poolapi", "muxproto", "lease", "joblog", "procscan", "limits",
		"jobspec", "putfile", "control", "podcmd", "podapi", "probe", "shellproxy", "stageclient", "sizing"}},
	{"a job's calls on its pod", []string{"executor/session"}},
	{"a job's exec stream, and a call through a child", []string{"executor/mux", "executor/podexec"}},
	{"Kubernetes side of a pool", []string{"executor/pool"}},
	{"the fake of it, for the executor side's tests", []string{"executor/fake"}},
	{"PID 1", []string{"supervisor"}},
	{"executor core", []string{"executor"}},
	{"drivers and pool controller, and its simulation", []string{"executor/github", "executor/gitlab", "pools", "pools/poolsim", "pools/offer"}},
	{"commands", []string{"cmd/...", "charts", "e2e/..."}},
}

// layerOf returns the index in Layers of the package pkg (relative to
// the module), -1 when none lists it.
func layerOf(pkg string) int {
	for i, l := range Layers {
		for _, p := range l.Pkgs {
			base, tree := strings.CutSuffix(p, "/...")
			if pkg == base || tree && strings.HasPrefix(pkg, base+"/") {
				return i
			}
		}
	}
	return -1
}

// layerProblems lists the imports of f that point up a layer, or across
// one above the libraries, and f's package when no layer lists it.
func layerProblems(f goFile) []string {
	pkg := path.Dir(f.rel)
	from := layerOf(pkg)
	if from < 0 {
		return []string{f.rel + ": package " + pkg + " is in no layer of codeshape.Layers"}
	}
	var probs []string
	for _, is := range f.ast.Imports {
		p, _ := strconv.Unquote(is.Path.Value)
		if !strings.HasPrefix(p, module+"/") {
			continue
		}
		to := layerOf(strings.TrimPrefix(p, module+"/"))
		if to > from || to == from && from > 0 && strings.TrimPrefix(p, module+"/") != pkg {
			probs = append(probs, f.rel+" ("+Layers[from].Name+") imports "+p+" ("+Layers[max(to, 0)].Name+"): a layer imports only those below it")
		}
	}
	return probs
}

func TestLayers(t *testing.T) {
	var probs []string
	n := 0
	for _, f := range moduleFiles(t, root(t)) {
		if strings.HasSuffix(f.rel, "_test.go") {
			// A test may reach up for a fake or a fixture (charts' tests
			// read poolapi, e2e tests run commands).
			continue
		}
		n++
		probs = append(probs, layerProblems(f)...)
	}
	require.Greater(t, n, 50)
	sort.Strings(probs)
	assert.Empty(t, probs)
}

// The layer check finds an import up a layer, one across a layer above
// the libraries, and a package in no layer.
func TestLayersCatchTheirCase(t *testing.T) {
	for _, c := range []struct {
		rel, imp string
		probs    int
	}{
		{"executor/gitlab/x.go", "executor", 0},
		{"executor/gitlab/x.go", "poolapi", 0},
		{"control/x.go", "internal/jsonenc", 0},
		{"internal/kubeclient/x.go", "executor/pool", 1},
		{"executor/pool/x.go", "executor", 1},
		{"executor/mux/x.go", "executor/pool", 1},
		{"executor/session/x.go", "executor/mux", 1},
		{"supervisor/x.go", "executor/pool", 0}, // below, not the PID 1 rule: TestPID1ImportsNoExecutorSide
		{"executor/gitlab/x.go", "executor/github", 1},
		{"newpkg/x.go", "control", 1},
	} {
		src := "package x\nimport _ \"" + module + "/" + c.imp + "\"\n"
		f := parseFile(t, c.rel, src)
		assert.Len(t, layerProblems(f), c.probs, "%s importing %s", c.rel, c.imp)
	}
}

// parseFile parses src as the product file rel.
func parseFile(t *testing.T, rel, src string) goFile {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	require.NoError(t, err)
	return goFile{rel: rel, product: true, fset: fset, ast: f}
}

// PID1Modules are the only modules other than the standard library that
// PID 1 (cmd/warmpod) may import: it stays small and static, and imports
// nothing of the executor side (CONTRIBUTING.md).
var PID1Modules = []string{"golang.org/x/sys/", "github.com/creack/pty"}

// PID 1's whole import graph, followed through this module's packages:
// no executor package, no pool controller, no client-go.
func TestPID1ImportsNoExecutorSide(t *testing.T) {
	var bad []string
	seen := walkImports(productImports(t, func(goFile) bool { return true }), "cmd/warmpod", func(pkg, p string) {
		own, ok := strings.CutPrefix(p, module+"/")
		switch {
		case ok:
			if layerOf(own) != layerOf("supervisor") && layerOf(own) != 0 && own != "cmd/warmpod" {
				bad = append(bad, pkg+" imports "+p)
			}
			if own == "poolapi" || own == "internal/kubeclient" || own == "sizing" {
				bad = append(bad, pkg+" imports "+p+" (executor side)")
			}
		case importClass(p) == 1 && !slices.ContainsFunc(PID1Modules, func(m string) bool { return strings.HasPrefix(p, m) }):
			bad = append(bad, pkg+" imports "+p)
		}
	})
	require.True(t, seen["supervisor"], "the walk did not reach PID 1's supervisor")
	sort.Strings(bad)
	assert.Empty(t, bad)
}

// walkImports follows imports (package → its imports) from start through
// this module's packages, calling visit with each package reached and
// each of its imports; it returns the packages reached.
func walkImports(imports map[string][]string, start string, visit func(pkg, imp string)) map[string]bool {
	seen := map[string]bool{}
	var walk func(pkg string)
	walk = func(pkg string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		for _, p := range imports[pkg] {
			visit(pkg, p)
			if own, ok := strings.CutPrefix(p, module+"/"); ok {
				walk(own)
			}
		}
	}
	walk(start)
	return seen
}

// PerCall are the packages a driver's per-call process (a GitLab stage, an
// Actions step) runs on: none of them may reach client-go or the
// Kubernetes API types, whose package initialisation alone costs a
// process start tens of milliseconds (issue 40).
var PerCall = []string{"executor/session", "executor/mux", "executor/podexec", "executor/github", "cmd/warmpod-github", "executor/gitlab", "cmd/warmpod-gitlab"}

// inPerCallBuild tells whether f is compiled into the per-call builds
// (`go build -tags percall`): its //go:build line, if any, holds with the
// percall tag set (and linux/amd64, as `make build` builds).
func inPerCallBuild(f goFile) bool {
	for _, cg := range f.ast.Comments {
		if cg.Pos() > f.ast.Package {
			break
		}
		for _, c := range cg.List {
			if constraint.IsGoBuild(c.Text) {
				expr, err := constraint.Parse(c.Text)
				if err != nil {
					return true
				}
				return expr.Eval(func(tag string) bool {
					return tag == "percall" || tag == "linux" || tag == "unix" || tag == runtime.GOARCH
				})
			}
		}
	}
	return true
}

func TestPerCallImportsNoKubernetes(t *testing.T) {
	imports := productImports(t, inPerCallBuild)
	for _, start := range PerCall {
		var bad []string
		walkImports(imports, start, func(pkg, p string) {
			if strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/") {
				bad = append(bad, pkg+" imports "+p)
			}
		})
		require.NotEmpty(t, imports[start], "%s has no product files", start)
		assert.Empty(t, bad, "%s reaches Kubernetes packages", start)
	}
}

// productImports maps each package (relative to the module) to the
// imports of its product files that keep takes.
func productImports(t *testing.T, keep func(goFile) bool) map[string][]string {
	imports := map[string][]string{}
	for _, f := range moduleFiles(t, root(t)) {
		if !f.product || strings.HasSuffix(f.rel, "_test.go") || !keep(f) {
			continue
		}
		pkg := path.Dir(f.rel)
		for _, is := range f.ast.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			imports[pkg] = append(imports[pkg], p)
		}
	}
	return imports
}
