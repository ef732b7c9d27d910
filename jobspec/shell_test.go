package jobspec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// evalScript evals the script on stdin, then prints $K unchanged.
const evalScript = `eval "$(cat)"; printf %s "$K"`

// shells returns the shells to run the round trip in: /bin/sh always,
// plus bash, dash and busybox sh (the shell of most CI helper images)
// when installed.
func shells(t testing.TB) []string {
	t.Helper()
	out := []string{"/bin/sh"}
	seen := map[string]bool{}
	if real, err := filepath.EvalSymlinks("/bin/sh"); err == nil {
		seen[real] = true
	}
	for _, name := range []string{"bash", "dash"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && !seen[real] {
			seen[real] = true
			out = append(out, p)
		}
	}
	if p, err := exec.LookPath("busybox"); err == nil {
		out = append(out, p)
	}
	return out
}

// shellCommand returns sh -c script, killed if it runs longer than a
// minute (broken quoting can make the script run commands from the value).
func shellCommand(t testing.TB, sh, script string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	if filepath.Base(sh) == "busybox" {
		return exec.CommandContext(ctx, sh, "sh", "-c", script)
	}
	return exec.CommandContext(ctx, sh, "-c", script)
}

// TestQuoteNeverExecutes evals values built to run a command if quoting
// failed, in every shell, and checks that the command never ran.
func TestQuoteNeverExecutes(t *testing.T) {
	canary := filepath.Join(t.TempDir(), "ran")
	touch := "touch " + canary
	for _, sh := range shells(t) {
		for _, v := range []string{"$(" + touch + ")", "`" + touch + "`", "'; " + touch + "; '", "'\n" + touch + "\n'",
			"\n" + touch + "\n", "\\'$(" + touch + ")'", "${x:-$(" + touch + ")}", "$((0))$(" + touch + ")"} {
			got := shellRoundTrip(t, sh, v)
			require.Equal(t, v, got, sh)
			_, err := os.Stat(canary)
			require.True(t, errors.Is(err, os.ErrNotExist), "%s executed the value %q", sh, v)
		}
	}
}

// shellRoundTrip renders K=value with RenderExports, evals it in sh and
// returns what the shell holds in $K.
func shellRoundTrip(t testing.TB, sh, value string) string {
	t.Helper()
	var script bytes.Buffer
	require.NoError(t, RenderExports(&script, []string{"K=" + value}))
	cmd := shellCommand(t, sh, evalScript)
	cmd.Stdin = &script
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s: %s", sh, stderr.String())
	require.Empty(t, stderr.String(), sh)
	return string(out)
}

// nastyValues are values that break naive quoting.
func nastyValues() map[string]string {
	return map[string]string{
		"empty":              "",
		"plain":              "hello",
		"single quote":       "it's",
		"only single quote":  "'",
		"quote escape":       `'\''`,
		"double quotes":      `say "hi"`,
		"command subst":      "$(id)",
		"backticks":          "`id`",
		"variables":          "$HOME ${PATH} $0 $@ $$",
		"backslashes":        `a\b\\c\`,
		"newlines":           "line1\nline2\n\nline4",
		"trailing newline":   "value\n",
		"trailing newlines":  "value\n\n\n",
		"only newline":       "\n",
		"tabs and CR":        "a\tb\r\nc",
		"unicode":            "grüße, 日本語, ünïcödé",
		"emoji":              "🔑🚀 secret 👍🏽",
		"leading dash":       "-n -e --help",
		"glob":               "* ? [a-z] [! *.go",
		"semicolon and pipe": "a; rm -rf / | cat & echo",
		"redirections":       "> /tmp/x < /etc/passwd 2>&1",
		"braces and tilde":   "~ {a,b} ~root",
		"hash":               "# not a comment",
		"heredoc marker":     "<<EOF\nEOF",
		"high bytes":         "\x80\x81\x82\x88\xfe\xff",
		"control bytes":      "\x01\x02\x1b[31m\x7f",
		"mixed":              `'"$(echo pwned)"'` + "`id`" + `\'` + "\n'",
		"100KB":              strings.Repeat("a'b\"c$(d)\n", 10<<10),
	}
}

func TestQuoteRoundTripShell(t *testing.T) {
	for _, sh := range shells(t) {
		for name, value := range nastyValues() {
			t.Run(filepath.Base(sh)+"/"+name, func(t *testing.T) {
				got := shellRoundTrip(t, sh, value)
				require.True(t, got == value, "round trip changed the value: got %q", got)
			})
		}
	}
}

func TestRenderExports(t *testing.T) {
	var buf bytes.Buffer
	env := []string{"A=1", "noequals", "1BAD=x", "=empty", "B-C=x", "_ok=it's", "E=", "F=a=b"}
	require.NoError(t, RenderExports(&buf, env))
	require.Equal(t, "export A='1'\nexport _ok='it'\\''s'\nexport E=''\nexport F='a=b'\n", buf.String())

	// Many variables at once, through a real shell.
	env = []string{"A=it's", "B=$(id)\n", "C=", "D=\\`x`"}
	buf.Reset()
	require.NoError(t, RenderExports(&buf, env))
	cmd := shellCommand(t, "/bin/sh", `eval "$(cat)"; printf '%s\0' "$A" "$B" "$C" "$D"`)
	cmd.Stdin = &buf
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Equal(t, "it's\x00$(id)\n\x00\x00\\`x`\x00", string(out))

	// The script's variables really are exported to children.
	buf.Reset()
	require.NoError(t, RenderExports(&buf, []string{"K=v'1"}))
	cmd = shellCommand(t, "/bin/sh", `eval "$(cat)"; /bin/sh -c 'printf %s "$K"'`)
	cmd.Stdin = &buf
	out, err = cmd.Output()
	require.NoError(t, err)
	require.Equal(t, "v'1", string(out))
}

func TestRenderExportsNUL(t *testing.T) {
	var buf bytes.Buffer
	err := RenderExports(&buf, []string{"A=ok", "K=" + secretMark + "\x00x"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "K")
	require.NotContains(t, err.Error(), secretMark)
	require.Zero(t, buf.Len(), "nothing may be written when an entry is rejected")

	// A NUL in a skipped entry does not matter.
	require.NoError(t, RenderExports(&buf, []string{"1X=\x00"}))
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("boom") }

func TestRenderExportsWriteError(t *testing.T) {
	require.EqualError(t, RenderExports(failWriter{}, []string{"A=1"}), "boom")
}
