package codeshape

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// MaxFuncLines is the longest a product function may be, counted from its
// func keyword to its closing brace.
const MaxFuncLines = 100

// module is this module's import path, the prefix of its own packages.
const module = "github.com/warmpod/warmpod"

// goFile is one parsed source file of the module.
type goFile struct {
	rel     string // path relative to the module root, slash-separated
	product bool   // not a test and not under e2e/
	fset    *token.FileSet
	ast     *ast.File
}

// moduleFiles parses every .go file of the module rooted at root,
// skipping testdata, hidden directories and nested modules (bench/).
func moduleFiles(t *testing.T, root string) []goFile {
	t.Helper()
	var out []goFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || fileExists(filepath.Join(p, "go.mod"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		product := !strings.HasSuffix(rel, "_test.go") && !strings.HasPrefix(rel, "e2e/")
		out = append(out, goFile{rel: rel, product: product, fset: fset, ast: f})
		return nil
	})
	require.NoError(t, err)
	return out
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// longFuncs lists the functions of f longer than limit lines.
func longFuncs(f goFile, limit int) []string {
	var long []string
	for _, d := range f.ast.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		n := f.fset.Position(fd.End()).Line - f.fset.Position(fd.Pos()).Line + 1
		if n > limit {
			long = append(long, f.rel+": "+fd.Name.Name+" is "+itoa(n)+" lines")
		}
	}
	return long
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// importClass orders the import groups: the standard library (no dot in
// the first path element), other modules, this module.
func importClass(path string) int {
	switch {
	case path == module || strings.HasPrefix(path, module+"/"):
		return 2
	case strings.Contains(strings.SplitN(path, "/", 2)[0], "."):
		return 1
	default:
		return 0
	}
}

// importProblems describes how f's import groups break the rule: each
// group (imports separated by a blank line) holds one class, and the
// classes come in order.
func importProblems(f goFile) []string {
	var probs []string
	for _, d := range f.ast.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.IMPORT || len(gd.Specs) < 2 {
			continue
		}
		prevEnd, prevClass, groupClass := 0, -1, -1
		for _, s := range gd.Specs {
			is := s.(*ast.ImportSpec)
			start := is.Pos()
			if is.Doc != nil {
				start = is.Doc.Pos()
			}
			line := f.fset.Position(start).Line
			class := importClass(strings.Trim(is.Path.Value, `"`))
			newGroup := prevEnd != 0 && line > prevEnd+1
			switch {
			case prevClass == -1:
				groupClass = class
			case newGroup && class <= groupClass:
				probs = append(probs, f.rel+": "+is.Path.Value+" starts a group out of order (standard library, modules, this module)")
			case newGroup:
				groupClass = class
			case class != groupClass:
				probs = append(probs, f.rel+": "+is.Path.Value+" shares a group with imports of another kind")
			}
			prevEnd, prevClass = f.fset.Position(is.End()).Line, class
		}
	}
	return probs
}

func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(r, "go.mod"))
	return r
}

func TestNoLongProductFunctions(t *testing.T) {
	files := moduleFiles(t, root(t))
	var long []string
	products := 0
	for _, f := range files {
		if f.product {
			products++
			long = append(long, longFuncs(f, MaxFuncLines)...)
		}
	}
	require.Greater(t, products, 50, "the walk found too few product files to be the module")
	assert.Empty(t, long, "split these functions by concern (at most %d lines)", MaxFuncLines)
}

func TestImportGroups(t *testing.T) {
	var probs []string
	for _, f := range moduleFiles(t, root(t)) {
		probs = append(probs, importProblems(f)...)
	}
	assert.Empty(t, probs, "run goimports -local %s -w on these files", module)
}

// The checks find what they are for.
func TestChecksCatchTheirCase(t *testing.T) {
	parse := func(src string) goFile {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", src, parser.ParseComments)
		require.NoError(t, err)
		return goFile{rel: "x.go", product: true, fset: fset, ast: f}
	}
	body := "package x\nfunc long() {\n" + strings.Repeat("\t_ = 1\n", 99) + "}\nfunc short() {}\n"
	assert.Equal(t, []string{"x.go: long is 101 lines"}, longFuncs(parse(body), MaxFuncLines))

	for _, c := range []struct {
		imports string
		probs   int
	}{
		{"\"fmt\"\n\"os\"\n\n\"golang.org/x/sys/unix\"\n\n\"" + module + "/control\"", 0},
		{"\"fmt\"\n\n// why\n_ \"" + module + "/internal/oneproc\"", 0},
		{"\"fmt\"\n\"golang.org/x/sys/unix\"", 1},
		{"\"golang.org/x/sys/unix\"\n\"" + module + "/control\"", 1},
		{"\"" + module + "/control\"\n\n\"fmt\"", 1},
		{"\"fmt\"\n\n\"os\"", 1},
	} {
		f := parse("package x\nimport (\n" + c.imports + "\n)\n")
		assert.Len(t, importProblems(f), c.probs, "%s", c.imports)
	}
}
