package jobspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzQuote checks that any value without NUL survives RenderExports and
// eval byte for byte in every shell of shells (dash as /bin/sh, bash,
// busybox sh). Each input runs the shells, so the seed corpus is small.
func FuzzQuote(f *testing.F) {
	for _, seed := range []string{"", "it's", `'\''`, "$(id)`id`", "a\nb\n", "\\\"*?[", "🔑\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		if strings.IndexByte(value, 0) >= 0 {
			t.Skip("sh cannot hold NUL")
		}
		for _, sh := range shells(t) {
			got := shellRoundTrip(t, sh, value)
			require.True(t, got == value, "%s: round trip of %q gave %q", sh, value, got)
		}
	})
}

// FuzzParseSpec checks that ParseSpec never panics, that every error is a
// *SpecError, that errors never contain the token, and that the printed
// and JSON-encoded Spec do not depend on it. The token is framed by markers
// that appear in no message of this package and is placed as the value of
// "token" in front of fuzzed JSON; raw fuzzed bytes are parsed on their own
// too.
func FuzzParseSpec(f *testing.F) {
	f.Add("tok", []byte(`,"id":"job-1"}`))
	f.Add("", []byte(`,"id":"a","timeout":"1h","lease_ttl":"1m","variables":[{"key":"A","value":"v","file":true}]}`))
	f.Add("x\\\"y", []byte(`}`))
	f.Add("t", []byte(`,"id":"a","variables":[{"key":"1"}]}`))
	f.Add("t", []byte(`,"id":"a","token":"again"}`))
	f.Add("\u0000", []byte(`,"id":"a"} trailing`))
	f.Fuzz(func(t *testing.T, tok string, rest []byte) {
		// Raw input: must not panic, errors must be *SpecError.
		if s, err := ParseSpec(rest); err != nil {
			requireSpecError(t, err)
		} else {
			s.Wipe()
		}

		token := "<<T0KEN:" + strings.ToValidUTF8(tok, "?") + ":T0KEN>>"
		quoted, err := json.Marshal(token)
		require.NoError(t, err)
		input := append([]byte(`{"token":`+string(quoted)), rest...)
		s, err := ParseSpec(input)
		if err != nil {
			requireSpecError(t, err)
			if strings.Contains(err.Error(), token) {
				// Only acceptable if the text comes from rest (say,
				// an unknown field named like the token): then the
				// same input with another token fails the same way.
				_, err2 := ParseSpec(append([]byte(`{"token":"other"`), rest...))
				require.True(t, err2 != nil && strings.Contains(err2.Error(), token), "error echoes the token: %v", err)
			}
			return
		}
		defer s.Wipe()
		require.Equal(t, token, s.Token.Reveal())
		// What fmt and encoding/json show must not depend on the
		// secret bytes at all.
		other := *s
		other.Token = NewSecret([]byte("other"))
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			require.Equal(t, fmt.Sprintf(verb, &other), fmt.Sprintf(verb, s), verb)
		}
		got, err := json.Marshal(s)
		require.NoError(t, err)
		want, err := json.Marshal(&other)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

func requireSpecError(t *testing.T, err error) {
	t.Helper()
	_, ok := err.(*SpecError)
	require.True(t, ok, "error %T is not a *SpecError: %v", err, err)
}

// FuzzSyntaxErrorOffset: the offset syntaxError reports (json.Indent's
// scanner) is the one json.Unmarshal reports, the decoder it replaced (PID
// 1's size, issue 30), for any input that is not valid JSON.
func FuzzSyntaxErrorOffset(f *testing.F) {
	for _, s := range []string{`{"id":"job-1"} x`, `{"id":`, ``, ` `, `{"a":[1,2,}`, "{\"a\":\"\x01\"}", `[[[[`, `nul`, `{"a":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var se *json.SyntaxError
		if !errors.As(json.Unmarshal(data, &struct{}{}), &se) {
			return
		}
		want := fmt.Sprintf("not valid JSON (error at byte offset %d)", se.Offset)
		require.Equal(t, want, syntaxError(data).Reason)
	})
}
