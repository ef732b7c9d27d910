package jobspec

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

// parsedSpec returns a Spec holding secretMark in its token and in two
// variable values.
func parsedSpec(t *testing.T) *Spec {
	t.Helper()
	s, err := ParseSpec([]byte(specJSON(`"id":"job-1"`, `"token":"`+secretMark+`-token"`,
		vars(`{"key":"A","value":"`+secretMark+`-a","masked":true}`, `{"key":"F","value":"`+secretMark+`-f","file":true}`))))
	require.NoError(t, err)
	t.Cleanup(s.Wipe)
	return s
}

func TestSecretRedactedByFmt(t *testing.T) {
	s := parsedSpec(t)
	sec := s.Token
	values := map[string]any{
		"Secret": sec, "*Secret": &sec, "Spec": *s, "*Spec": s,
		"Variable": s.Variables[0], "*Variable": &s.Variables[0], "[]Variable": s.Variables,
		"map": map[string]Secret{"k": sec}, "any slice": []any{sec, &sec},
	}
	verbs := []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s", "%-20v", "% x", "%#q"}
	for name, v := range values {
		for _, verb := range verbs {
			out := fmt.Sprintf(verb, v)
			require.NotContains(t, out, secretMark, "%s with %s: %s", name, verb, out)
			require.NotContains(t, out, fmt.Sprintf("%x", secretMark), "%s with %s", name, verb)
			require.NotContains(t, out, fmt.Sprintf("%X", secretMark), "%s with %s", name, verb)
		}
		require.NotContains(t, fmt.Sprint(v), secretMark, name)
		require.NotContains(t, fmt.Sprintln(v), secretMark, name)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		require.Equal(t, redacted, fmt.Sprintf(verb, sec), verb)
	}
	require.Equal(t, redacted, sec.String())
	require.Equal(t, redacted, sec.GoString())
	require.Equal(t, redacted, Secret{}.String())
	require.Contains(t, fmt.Sprintf("%+v", s), "Token:[redacted]")
}

func TestSecretRedactedByEncoders(t *testing.T) {
	s := parsedSpec(t)

	out, err := json.Marshal(s)
	require.NoError(t, err)
	require.NotContains(t, string(out), secretMark)
	require.Contains(t, string(out), `"Token":"[redacted]"`)
	require.Contains(t, string(out), `"Value":"[redacted]"`)

	out, err = json.Marshal(map[string]any{"tok": s.Token, "ptr": &s.Token, "vars": s.Variables})
	require.NoError(t, err)
	require.NotContains(t, string(out), secretMark)

	txt, err := s.Token.MarshalText()
	require.NoError(t, err)
	require.Equal(t, redacted, string(txt))

	js, err := s.Token.MarshalJSON()
	require.NoError(t, err)
	require.Equal(t, `"[redacted]"`, string(js))

	type doc struct{ Token Secret }
	out, err = xml.Marshal(doc{s.Token})
	require.NoError(t, err)
	require.NotContains(t, string(out), secretMark)
}

func TestSecretRedactedByLoggers(t *testing.T) {
	s := parsedSpec(t)
	// PID 1 logs through internal/initlog, the executor side through
	// log/slog's text and JSON handlers: a secret must not come out of any,
	// whether passed as a value, a pointer, a slice element, inside an
	// error, a formatted string or a logger's attributes.
	for _, name := range []string{"text", "json"} {
		var buf bytes.Buffer
		opts := &slog.HandlerOptions{Level: slog.LevelDebug - 4}
		var h slog.Handler = slog.NewTextHandler(&buf, opts)
		if name == "json" {
			h = slog.NewJSONHandler(&buf, opts)
		}
		log := slog.New(h)
		log.Info("job start", "spec", s, "spec_value", *s, "token", s.Token, "token_ptr", &s.Token,
			"vars", s.Variables, "var", s.Variables[0], "fmt", fmt.Sprintf("%v %s %x", s, s.Token, s.Token))
		log.With("token", s.Token).Error("failed", "error", fmt.Errorf("job %v", s))
		log.WithGroup("g").Debug("grouped", "token", s.Token, "spec", s)
		out := buf.String()
		require.NotEmpty(t, out)
		require.NotContains(t, out, secretMark, "slog %s handler:\n%s", name, out)
		require.Contains(t, out, redacted)
	}
	for _, f := range []initlog.Format{initlog.Text, initlog.JSON} {
		var buf bytes.Buffer
		log := initlog.New(&buf, initlog.LevelTrace, f, time.Now)
		log.Info("job start", "spec", s, "spec_value", *s, "token", s.Token, "token_ptr", &s.Token,
			"vars", s.Variables, "var", s.Variables[0], "fmt", fmt.Sprintf("%v %s %x", s, s.Token, s.Token))
		log.With("token", s.Token).Error("failed", "error", fmt.Errorf("job %v", s))
		out := buf.String()
		require.Equal(t, 2, strings.Count(out, "\n"))
		require.NotContains(t, out, secretMark, "initlog format %d:\n%s", f, out)
		require.Contains(t, out, redacted)
	}
}

func TestSecretWipe(t *testing.T) {
	b := []byte(secretMark)
	s := NewSecret(b)
	require.Equal(t, len(secretMark), s.Len())
	require.Equal(t, secretMark, s.Reveal())
	cp := s // copies share the bytes
	s.Wipe()
	require.Equal(t, make([]byte, len(secretMark)), b)
	require.Zero(t, s.Len())
	require.Equal(t, "", s.Reveal())
	require.Equal(t, strings.Repeat("\x00", len(secretMark)), cp.Reveal())

	var zero Secret
	zero.Wipe()
	require.Zero(t, zero.Len())
	var nilSecret *Secret
	nilSecret.Wipe()
}
