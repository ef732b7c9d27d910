package doclinks

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// link is one link found in a Markdown file.
type link struct {
	Line   int    // 1-based line of the file
	Target string // as written: a URL, a path, path#fragment or #fragment
	Ref    string // for a reference use ([text][label]): the label; Target is then ""
}

// doc is what the checker needs of one Markdown file.
type doc struct {
	Links   []link
	Anchors map[string]bool // GitHub anchors of its headings (and explicit <a id/name>)
	Defs    map[string]bool // reference definition labels, lower case
}

var (
	// [text](target) or ![alt](target), with an optional title; the
	// target may be in angle brackets.
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)`)
	// [text][label] and the collapsed [label][].
	refUse = regexp.MustCompile(`!?\[([^\]]+)\]\[([^\]]*)\]`)
	// [label]: target at the start of a line.
	refDef = regexp.MustCompile(`^ {0,3}\[([^\]]+)\]:\s*(<[^>]*>|\S+)`)
	// <https://...> and <mailto:...>.
	autoLink = regexp.MustCompile(`<((?:https?|mailto):[^>\s]+)>`)
	// ATX heading: up to 3 spaces, 1–6 '#', a space, the text.
	atxHeading = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$`)
	// <a name="x"> or any tag with id="x".
	htmlAnchor = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:name|id)="([^"]+)"`)
	// [text](url) inside a heading: only the text shows.
	headingLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// A fence line: ``` or ~~~ (three or more), up to 3 spaces in.
	fence = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	// GitHub's line anchors of non-Markdown files: #L10, #L10-L20.
	lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// anchor is GitHub's anchor of a heading's text: lower case, every
// character that is not a letter, digit, '-', '_' or space removed,
// spaces as '-'. Inline markup must already be gone (see headingText).
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// headingText is the text GitHub shows for a heading's source: code
// spans keep their content, links their text, emphasis markers go
// ('*' only: '_' is a word character to GitHub and stays in the anchor).
func headingText(src string) string {
	s := headingLink.ReplaceAllString(src, "$1")
	s = strings.ReplaceAll(s, "`", "")
	s = strings.ReplaceAll(s, "*", "")
	return s
}

// blankCodeSpans replaces every code span of line (a run of n backticks up
// to the next run of exactly n) and every backslash escape by spaces, so
// that what looks like a link inside them is not one. Lengths are kept.
func blankCodeSpans(line string) string {
	b := []byte(line)
	for i := 0; i < len(b); {
		switch {
		case b[i] == '\\' && i+1 < len(b) && strings.IndexByte("\\`*_{}[]()#+-.!<>|\"'", b[i+1]) >= 0:
			b[i], b[i+1] = ' ', ' '
			i += 2
		case b[i] == '`':
			n := 0
			for i+n < len(b) && b[i+n] == '`' {
				n++
			}
			end := -1
			for j := i + n; j < len(b); {
				if b[j] != '`' {
					j++
					continue
				}
				m := 0
				for j+m < len(b) && b[j+m] == '`' {
					m++
				}
				if m == n {
					end = j + m
					break
				}
				j += m
			}
			if end < 0 {
				i += n // an unclosed run is literal text
				continue
			}
			for k := i; k < end; k++ {
				b[k] = ' '
			}
			i = end
		default:
			i++
		}
	}
	return string(b)
}

// parse extracts the links, heading anchors and reference definitions of
// a Markdown document. Fenced code blocks and HTML comments hold neither
// links nor headings.
func parse(text string) doc {
	d := doc{Anchors: map[string]bool{}, Defs: map[string]bool{}}
	seen := map[string]int{} // anchor → how many headings had it
	addHeading := func(src string) {
		a := anchor(headingText(src))
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		d.Anchors[a] = true
	}
	lines := strings.Split(text, "\n")
	var fenceMark string // the open fence's run, "" outside a fence
	inComment := false
	prevText := "" // the previous line, when it can be a setext heading's text
	for i, raw := range lines {
		line := strings.TrimRight(raw, "\r")
		if fenceMark != "" {
			if m := fence.FindStringSubmatch(line); m != nil && m[1][0] == fenceMark[0] && len(m[1]) >= len(fenceMark) &&
				strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), m[1][:1])) == "" {
				fenceMark = ""
			}
			prevText = ""
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil && !inComment {
			fenceMark = m[1]
			prevText = ""
			continue
		}
		// HTML comments, possibly over several lines.
		var vis strings.Builder
		for rest := line; rest != ""; {
			if inComment {
				end := strings.Index(rest, "-->")
				if end < 0 {
					rest = ""
					break
				}
				rest, inComment = rest[end+3:], false
				continue
			}
			start := strings.Index(rest, "<!--")
			if start < 0 {
				vis.WriteString(rest)
				break
			}
			vis.WriteString(rest[:start])
			rest, inComment = rest[start+4:], true
		}
		line = vis.String()
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			d.Anchors[m[1]] = true
		}
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			text := strings.TrimRight(m[2], "#")
			if strings.HasSuffix(m[2], "#") && !strings.HasSuffix(text, " ") && text != "" {
				text = m[2] // a closing sequence needs a space before it
			}
			addHeading(text)
		} else if t := strings.TrimSpace(line); prevText != "" && t != "" &&
			(strings.Trim(t, "=") == "" || strings.Trim(t, "-") == "") && len(line)-len(strings.TrimLeft(line, " ")) < 4 {
			addHeading(prevText) // setext: text, then a line of '=' or '-'
			prevText = ""
		}
		if strings.TrimSpace(line) == "" || atxHeading.MatchString(line) {
			prevText = ""
		} else if prevText == "" {
			prevText = strings.TrimSpace(line)
		}

		code := blankCodeSpans(line)
		if m := refDef.FindStringSubmatch(code); m != nil {
			d.Defs[strings.ToLower(m[1])] = true
			d.Links = append(d.Links, link{Line: i + 1, Target: strings.Trim(m[2], "<>")})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(code, -1) {
			d.Links = append(d.Links, link{Line: i + 1, Target: strings.Trim(m[1], "<>")})
		}
		for _, m := range refUse.FindAllStringSubmatch(code, -1) {
			label := m[2]
			if label == "" {
				label = m[1]
			}
			d.Links = append(d.Links, link{Line: i + 1, Ref: strings.ToLower(label)})
		}
		for _, m := range autoLink.FindAllStringSubmatch(code, -1) {
			d.Links = append(d.Links, link{Line: i + 1, Target: m[1]})
		}
	}
	return d
}

// checker checks the links of the Markdown files under root.
type checker struct {
	root  string
	docs  map[string]doc // by absolute path, parsed on first use
	stats struct{ files, links, relative, fragments, external int }
}

func (c *checker) doc(path string) (doc, error) {
	if d, ok := c.docs[path]; ok {
		return d, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return doc{}, err
	}
	d := parse(string(b))
	c.docs[path] = d
	return d, nil
}

// checkFile returns one problem per broken link of the Markdown file at
// path, each as "file:line: target: why" with file relative to root.
func (c *checker) checkFile(path string) []string {
	rel, _ := filepath.Rel(c.root, path)
	d, err := c.doc(path)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", rel, err)}
	}
	c.stats.files++
	var problems []string
	for _, l := range d.Links {
		c.stats.links++
		where := fmt.Sprintf("%s:%d", rel, l.Line)
		if l.Ref != "" {
			if !d.Defs[l.Ref] {
				problems = append(problems, fmt.Sprintf("%s: [%s]: reference link without a definition", where, l.Ref))
			}
			continue
		}
		if why := c.checkTarget(path, d, l.Target); why != "" {
			problems = append(problems, fmt.Sprintf("%s: %s: %s", where, l.Target, why))
		}
	}
	return problems
}

// checkTarget says what is wrong with target, a link of the file at from
// (whose parsed form is self); "" when nothing is.
func (c *checker) checkTarget(from string, self doc, target string) string {
	if target == "" {
		return "empty target"
	}
	if u, err := url.Parse(target); err == nil && u.Scheme != "" {
		c.stats.external++
		switch u.Scheme {
		case "http", "https":
			if u.Host == "" || strings.ContainsAny(u.Host, " \t") {
				return "not a valid URL: no host"
			}
		case "mailto":
			if u.Opaque == "" || !strings.Contains(u.Opaque, "@") {
				return "not a valid mailto: address"
			}
		default:
			return fmt.Sprintf("scheme %q: only http, https, mailto and relative links are allowed", u.Scheme)
		}
		return ""
	}
	pathPart, frag, _ := strings.Cut(target, "#")
	dest := from
	if pathPart != "" {
		c.stats.relative++
		p, err := url.PathUnescape(pathPart)
		if err != nil {
			return "bad %-escape in the path"
		}
		if strings.HasPrefix(p, "/") {
			dest = filepath.Join(c.root, filepath.FromSlash(p)) // GitHub: from the repository's root
		} else {
			dest = filepath.Join(filepath.Dir(from), filepath.FromSlash(p))
		}
		if r, err := filepath.Rel(c.root, dest); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return "points outside the repository"
		}
		st, err := os.Stat(dest)
		if err != nil {
			return "no such file or directory"
		}
		if frag != "" && st.IsDir() {
			return "a #fragment on a directory"
		}
	}
	if frag == "" {
		return ""
	}
	c.stats.fragments++
	if !strings.HasSuffix(strings.ToLower(dest), ".md") {
		if lineAnchor.MatchString(frag) {
			return ""
		}
		return "a #fragment into a file that is not Markdown (only #L<n> line anchors are)"
	}
	d := self
	if dest != from {
		var err error
		if d, err = c.doc(dest); err != nil {
			return err.Error()
		}
	}
	if !d.Anchors[frag] {
		return fmt.Sprintf("no heading with anchor #%s in %s", frag, filepath.Base(dest))
	}
	return ""
}

// markdownFiles lists the *.md files under root, skipping .git, testdata
// directories and build output. bench/*.md are included although
// `make bench` writes most of them: they are committed pages that the
// README and the guides point to, and a broken link in one should send
// the fix to its generator rather than go unnoticed.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			switch e.Name() {
			case ".git", "testdata", "node_modules", "bin":
				if path != root {
					return filepath.SkipDir
				}
			}
			return nil
		}
		if strings.HasSuffix(e.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	slices.Sort(files)
	return files
}

// repoRoot is the directory of the module's go.mod, above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
}

// TestRepositoryLinks checks every link of every Markdown file of the
// repository. The counts guard against a walk or a parser that finds
// nothing and so passes.
func TestRepositoryLinks(t *testing.T) {
	root := repoRoot(t)
	c := &checker{root: root, docs: map[string]doc{}}
	files := markdownFiles(t, root)
	var problems []string
	for _, f := range files {
		problems = append(problems, c.checkFile(f)...)
	}
	t.Logf("%d Markdown files, %d links: %d relative, %d with a #fragment, %d external (syntax only)",
		c.stats.files, c.stats.links, c.stats.relative, c.stats.fragments, c.stats.external)
	require.Empty(t, problems, "broken links (file:line: target: why):\n%s", strings.Join(problems, "\n"))

	names := make([]string, len(files))
	for i, f := range files {
		names[i], _ = filepath.Rel(root, f)
	}
	for _, want := range []string{"README.md", "CONTRIBUTING.md", "docs/reference/protocol.md", "docs/design/supervisor.md"} {
		require.Contains(t, names, filepath.FromSlash(want), "the walk missed a page")
	}
	require.Greater(t, c.stats.files, 15, "Markdown files checked")
	require.Greater(t, c.stats.relative, 80, "relative links checked")
	require.Greater(t, c.stats.fragments, 10, "links with a #fragment checked")
}

func TestAnchor(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"How it works", "how-it-works"},
		{"GitHub Actions (ARC)", "github-actions-arc"},
		{"Example: a GitLab-style job over `kubectl exec`", "example-a-gitlab-style-job-over-kubectl-exec"},
		{"One exec per stage: `job stage`", "one-exec-per-stage-job-stage"},
		{"Per-job resources, in place", "per-job-resources-in-place"},
		{"0001. No net/http and no name resolver in PID 1", "0001-no-nethttp-and-no-name-resolver-in-pid-1"},
		{"Single-use pods by default (`--max-jobs 1`)", "single-use-pods-by-default---max-jobs-1"},
		{"warmpod as an init", "warmpod-as-an-init"},
		{"snake_case stays", "snake_case-stays"},
		{"**Bold** and [a link](x.md)", "bold-and-a-link"},
		{"Guarantees, threats and known gaps", "guarantees-threats-and-known-gaps"},
		{"Ünïcödé letters", "ünïcödé-letters"},
		{"  spaces  around ", "spaces--around"},
	} {
		t.Run(tc.heading, func(t *testing.T) {
			require.Equal(t, tc.want, anchor(headingText(tc.heading)))
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		md      string
		links   []link
		anchors []string
	}{
		{
			name:  "inline link and image",
			md:    "See [the guide](docs/guide.md#set-up) and ![logo](img/logo.png \"Logo\").",
			links: []link{{Line: 1, Target: "docs/guide.md#set-up"}, {Line: 1, Target: "img/logo.png"}},
		},
		{
			name:  "angle-bracket target",
			md:    "[spaced](<my file.md>)",
			links: []link{{Line: 1, Target: "my file.md"}},
		},
		{
			name:  "code span and link text in backticks",
			md:    "`[not](a.md)` but [`code`](b.md)",
			links: []link{{Line: 1, Target: "b.md"}},
		},
		{
			name:  "fenced code block",
			md:    "```sh\n[not](a.md)\n# not a heading\n```\n[yes](b.md)",
			links: []link{{Line: 5, Target: "b.md"}},
		},
		{
			name:  "tilde fence and HTML comment",
			md:    "~~~\n[not](a.md)\n~~~\n<!-- [not](c.md)\n[still not](d.md) -->[yes](e.md)",
			links: []link{{Line: 5, Target: "e.md"}},
		},
		{
			name:  "reference definition and uses",
			md:    "[text][Label] and [label][]\n\n[label]: docs/x.md",
			links: []link{{Line: 1, Ref: "label"}, {Line: 1, Ref: "label"}, {Line: 3, Target: "docs/x.md"}},
		},
		{
			name:  "autolink and escaped brackets",
			md:    "<https://example.com/x> \\[not\\](a.md)",
			links: []link{{Line: 1, Target: "https://example.com/x"}},
		},
		{
			name:    "headings: ATX, closing hashes, repeated, setext",
			md:      "# Title #\n## Notes\n## Notes\nSub\n---\n<a name=\"custom\"></a>",
			anchors: []string{"title", "notes", "notes-1", "sub", "custom"},
		},
		{
			name:    "a rule after a blank line is no heading",
			md:      "text\n\n---\n",
			anchors: []string{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := parse(tc.md)
			if tc.links != nil {
				require.Equal(t, tc.links, d.Links)
			}
			if tc.anchors != nil {
				got := []string{}
				for a := range d.Anchors {
					got = append(got, a)
				}
				require.ElementsMatch(t, tc.anchors, got)
			}
		})
	}
}

// TestCheckFile runs the checker on a small tree with one good and one
// broken link of each kind, so that it is known to fail when it should.
func TestCheckFile(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(root, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
		return p
	}
	write("docs/guide.md", "# Guide\n\n## Set-up\n")
	write("deploy/pod.yaml", "kind: Pod\n")
	readme := write("README.md", strings.Join([]string{
		"# Readme",
		"[ok](docs/guide.md) [ok](docs/guide.md#set-up) [ok](#readme) [ok](deploy/) [ok](/deploy/pod.yaml#L1)",
		"[ok](https://example.com) [ok](mailto:a@example.com) [ok][def]",
		"[gone](docs/gone.md)",
		"[bad anchor](docs/guide.md#setup)",
		"[bad self](#nowhere)",
		"[outside](../elsewhere.md)",
		"[no def][missing]",
		"[yaml anchor](deploy/pod.yaml#spec)",
		"[ftp](ftp://example.com/x)",
		"[no host](https://)",
		"",
		"[def]: docs/guide.md",
	}, "\n"))
	c := &checker{root: root, docs: map[string]doc{}}
	problems := c.checkFile(readme)
	want := []string{
		"README.md:4: docs/gone.md: no such file or directory",
		"README.md:5: docs/guide.md#setup: no heading with anchor #setup in guide.md",
		"README.md:6: #nowhere: no heading with anchor #nowhere in README.md",
		"README.md:7: ../elsewhere.md: points outside the repository",
		"README.md:8: [missing]: reference link without a definition",
		"README.md:9: deploy/pod.yaml#spec: a #fragment into a file that is not Markdown (only #L<n> line anchors are)",
		"README.md:10: ftp://example.com/x: scheme \"ftp\": only http, https, mailto and relative links are allowed",
		"README.md:11: https://: not a valid URL: no host",
	}
	require.Equal(t, want, problems)
}
