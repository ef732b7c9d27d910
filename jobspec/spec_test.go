package jobspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// secretMark is put in tokens and values of the test specs; no error
// message may contain it.
const secretMark = "s3cr3t-MARK"

// specJSON builds a job spec from members given as raw JSON.
func specJSON(members ...string) string { return "{" + strings.Join(members, ",") + "}" }

// vars builds a "variables" member from raw JSON objects.
func vars(objs ...string) string { return `"variables":[` + strings.Join(objs, ",") + "]" }

// manyVars returns n distinct variables as raw JSON objects.
func manyVars(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"key":"V%d","value":"%s"}`, i, secretMark)
	}
	return out
}

func TestParseSpecValid(t *testing.T) {
	const id = `"id":"job-1"`
	tests := []struct {
		name  string
		input string
		check func(t *testing.T, s *Spec)
	}{
		{"minimal", specJSON(id), func(t *testing.T, s *Spec) {
			require.Equal(t, "job-1", s.ID)
			require.Equal(t, DefaultTimeout, s.Timeout)
			require.Zero(t, s.LeaseTTL)
			require.Zero(t, s.Token.Len())
			require.Empty(t, s.Variables)
		}},
		{"full", specJSON(id, `"nonce":"n-1"`, `"token":"`+secretMark+`"`, `"timeout":"2h"`,
			`"lease_ttl":"60s"`, `"config_hash":"sha256:abc"`, `"scope":"group/project"`,
			vars(`{"key":"A","value":"x","masked":true,"file":false}`, `{"key":"_B2","value":"y","file":true}`)),
			func(t *testing.T, s *Spec) {
				require.Equal(t, "n-1", s.Nonce)
				require.Equal(t, secretMark, s.Token.Reveal())
				require.Equal(t, 2*time.Hour, s.Timeout)
				require.Equal(t, 60*time.Second, s.LeaseTTL)
				require.Equal(t, "sha256:abc", s.ConfigHash)
				require.Equal(t, "group/project", s.Scope)
				require.Len(t, s.Variables, 2)
				require.Equal(t, "A", s.Variables[0].Key)
				require.Equal(t, "x", s.Variables[0].Value.Reveal())
				require.True(t, s.Variables[0].Masked)
				require.False(t, s.Variables[0].File)
				require.Equal(t, "_B2", s.Variables[1].Key)
				require.True(t, s.Variables[1].File)
			}},
		{"trailing newline", specJSON(id) + "\n", nil},
		{"surrounding whitespace", " \t\r\n" + specJSON(id) + " \r\n\t", nil},
		{"nulls are absent", specJSON(id, `"nonce":null`, `"token":null`, `"timeout":null`, `"lease_ttl":null`, `"variables":null`),
			func(t *testing.T, s *Spec) { require.Equal(t, DefaultTimeout, s.Timeout) }},
		{"empty token", specJSON(id, `"token":""`), func(t *testing.T, s *Spec) { require.Zero(t, s.Token.Len()) }},
		{"id charset", specJSON(`"id":"Az09._-x.y"`), nil},
		{"id max length", specJSON(`"id":"` + strings.Repeat("a", MaxIDBytes) + `"`), nil},
		{"nonce max length", specJSON(id, `"nonce":"`+strings.Repeat("n", MaxIDBytes)+`"`), nil},
		{"unicode scope", specJSON(id, `"scope":"grüppe/😀"`), nil},
		{"token max length", specJSON(id, `"token":"`+strings.Repeat("t", MaxEnvString-MaxKeyBytes-2)+`"`),
			func(t *testing.T, s *Spec) { require.Equal(t, MaxEnvString-MaxKeyBytes-2, s.Token.Len()) }},
		{"token escapes", specJSON(id, `"token":"a\"b\\c\/d\n\t\u00e9\ud83d\ude00"`),
			func(t *testing.T, s *Spec) { require.Equal(t, "a\"b\\c/d\n\té😀", s.Token.Reveal()) }},
		{"timeout max", specJSON(id, `"timeout":"168h"`), func(t *testing.T, s *Spec) { require.Equal(t, MaxTimeout, s.Timeout) }},
		{"lease equals timeout", specJSON(id, `"timeout":"5m"`, `"lease_ttl":"300s"`), nil},
		{"lease_ttl under default timeout", specJSON(id, `"lease_ttl":"1h"`), nil},
		{"empty variables", specJSON(id, `"variables":[]`), nil},
		{"variable without value", specJSON(id, vars(`{"key":"A"}`)),
			func(t *testing.T, s *Spec) { require.Zero(t, s.Variables[0].Value.Len()) }},
		{"file variable value max length", specJSON(id, vars(`{"key":"A","file":true,"value":"`+strings.Repeat("v", MaxValueBytes)+`"}`)), nil},
		{"env variable value max length", specJSON(id, vars(`{"key":"A","value":"`+strings.Repeat("v", MaxEnvString-3)+`"}`)), nil},
		{"variable key max length", specJSON(id, vars(`{"key":"`+strings.Repeat("K", MaxKeyBytes)+`"}`)), nil},
		{"max variables", specJSON(id, vars(manyVars(MaxVariables)...)),
			func(t *testing.T, s *Spec) { require.Len(t, s.Variables, MaxVariables) }},
		{"variable value with newlines and quotes", specJSON(id, vars(`{"key":"A","value":"l1\nl2 'q' \"d\" $(id)"}`)),
			func(t *testing.T, s *Spec) { require.Equal(t, "l1\nl2 'q' \"d\" $(id)", s.Variables[0].Value.Reveal()) }},
		{"variable named like a token variable", specJSON(id, vars(`{"key":"CI_JOB_TOKEN","value":"x"}`)), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpec([]byte(tc.input))
			require.NoError(t, err)
			require.NotNil(t, s)
			if tc.check != nil {
				tc.check(t, s)
			}
			s.Wipe()
		})
	}
}

func TestParseSpecInvalid(t *testing.T) {
	const id = `"id":"job-1"`
	tok := `"token":"` + secretMark + `"`
	tests := []struct {
		name  string
		input string
		field string
	}{
		{"too large", specJSON(id, `"nonce":"`+strings.Repeat(" ", MaxSpecBytes)+`"`), ""},
		{"too large whitespace", specJSON(id) + strings.Repeat(" ", MaxSpecBytes), ""},
		{"empty input", "", ""},
		{"only whitespace", " \n", ""},
		{"not JSON", secretMark, ""},
		{"truncated", `{"id":"job-1","token":"` + secretMark, ""},
		{"array", `[` + specJSON(id) + `]`, ""},
		{"null", `null`, ""},
		{"string", `"` + secretMark + `"`, ""},
		{"trailing garbage", specJSON(id, tok) + ` x`, ""},
		{"two objects", specJSON(id) + specJSON(id), ""},
		{"two lines", specJSON(id) + "\n" + specJSON(id) + "\n", ""},
		{"unknown field", specJSON(id, tok, `"foo":1`), "foo"},
		{"unknown field holding a secret", specJSON(id, `"tokn":"`+secretMark+`"`), "tokn"},
		{"case-variant field", specJSON(`"ID":"job-1"`), "ID"},
		{"odd unknown field name", specJSON(id, `"a b\n":1`), `"a b\n"`},
		{"repeated field", specJSON(id, tok, tok), "token"},
		{"id missing", specJSON(tok), "id"},
		{"id null", specJSON(`"id":null`), "id"},
		{"id empty", specJSON(`"id":""`), "id"},
		{"id number", specJSON(`"id":1`), "id"},
		{"id too long", specJSON(`"id":"` + strings.Repeat("a", MaxIDBytes+1) + `"`), "id"},
		{"id slash", specJSON(`"id":"a/b"`), "id"},
		{"id dot", specJSON(`"id":"."`), "id"},
		{"id dotdot", specJSON(`"id":".."`), "id"},
		{"id leading dot", specJSON(`"id":".hidden"`), "id"},
		{"id inner dotdot", specJSON(`"id":"a..b"`), "id"},
		{"id space", specJSON(`"id":"a b"`), "id"},
		{"id unicode", specJSON(`"id":"jöb"`), "id"},
		{"id NUL", specJSON(`"id":"a\u0000b"`), "id"},
		{"nonce control char", specJSON(id, `"nonce":"a\u0007"`), "nonce"},
		{"nonce too long", specJSON(id, `"nonce":"`+strings.Repeat("n", MaxIDBytes+1)+`"`), "nonce"},
		{"nonce number", specJSON(id, `"nonce":5`), "nonce"},
		{"scope newline", specJSON(id, `"scope":"a\nb"`), "scope"},
		{"scope C1 control", specJSON(id, `"scope":"a\u0085b"`), "scope"},
		{"config_hash DEL", specJSON(id, `"config_hash":"a\u007f"`), "config_hash"},
		{"config_hash object", specJSON(id, `"config_hash":{}`), "config_hash"},
		{"token number", specJSON(id, `"token":12345`), "token"},
		{"token array", specJSON(id, `"token":["`+secretMark+`"]`), "token"},
		{"token too long", specJSON(id, `"token":"`+secretMark+strings.Repeat("t", MaxValueBytes)+`"`), "token"},
		{"token NUL", specJSON(id, `"token":"`+secretMark+`\u0000x"`), "token"},
		{"timeout garbage", specJSON(id, `"timeout":"soon"`), "timeout"},
		{"timeout number", specJSON(id, `"timeout":3600`), "timeout"},
		{"timeout no unit", specJSON(id, `"timeout":"3600"`), "timeout"},
		{"timeout zero", specJSON(id, `"timeout":"0s"`), "timeout"},
		{"timeout negative", specJSON(id, `"timeout":"-1h"`), "timeout"},
		{"timeout too long", specJSON(id, `"timeout":"168h0m1s"`), "timeout"},
		{"lease_ttl zero", specJSON(id, `"lease_ttl":"0s"`), "lease_ttl"},
		{"lease_ttl negative", specJSON(id, `"lease_ttl":"-5s"`), "lease_ttl"},
		{"lease_ttl over default timeout", specJSON(id, `"lease_ttl":"61m"`), "lease_ttl"},
		{"lease_ttl over timeout", specJSON(id, `"timeout":"5m"`, `"lease_ttl":"10m"`), "lease_ttl"},
		{"lease_ttl before timeout in input", specJSON(id, `"lease_ttl":"10m"`, `"timeout":"5m"`), "lease_ttl"},
		{"variables object", specJSON(id, `"variables":{}`), "variables"},
		{"variables string", specJSON(id, `"variables":"`+secretMark+`"`), "variables"},
		{"too many variables", specJSON(id, vars(manyVars(MaxVariables+1)...)), "variables"},
		{"variable not object", specJSON(id, vars(`"`+secretMark+`"`)), "variables[0]"},
		{"variable null", specJSON(id, vars(`{"key":"A"}`, `null`)), "variables[1]"},
		{"variable unknown field", specJSON(id, vars(`{"key":"A","value":"`+secretMark+`","foo":true}`)), "variables[0].foo"},
		{"variable case-variant field", specJSON(id, vars(`{"Key":"A"}`)), "variables[0].Key"},
		{"variable repeated field", specJSON(id, vars(`{"key":"A","value":"x","value":"y"}`)), "variables[0].value"},
		{"variable key missing", specJSON(id, vars(`{"value":"`+secretMark+`"}`)), "variables[0].key"},
		{"variable key null", specJSON(id, vars(`{"key":null}`)), "variables[0].key"},
		{"variable key empty", specJSON(id, vars(`{"key":""}`)), "variables[0].key"},
		{"variable key number", specJSON(id, vars(`{"key":1}`)), "variables[0].key"},
		{"variable key leading digit", specJSON(id, vars(`{"key":"A"}`, `{"key":"1A"}`)), "variables[1].key"},
		{"variable key dash", specJSON(id, vars(`{"key":"A-B"}`)), "variables[0].key"},
		{"variable key equals", specJSON(id, vars(`{"key":"A=B"}`)), "variables[0].key"},
		{"variable key space", specJSON(id, vars(`{"key":"A B"}`)), "variables[0].key"},
		{"variable key unicode", specJSON(id, vars(`{"key":"Ä"}`)), "variables[0].key"},
		{"variable key too long", specJSON(id, vars(`{"key":"`+strings.Repeat("K", MaxKeyBytes+1)+`"}`)), "variables[0].key"},
		{"variable key repeated", specJSON(id, vars(`{"key":"A"}`, `{"key":"B"}`, `{"key":"A"}`)), "variables[2].key"},
		{"variable value NUL", specJSON(id, vars(`{"key":"A","value":"`+secretMark+`\u0000"}`)), "variables[0].value"},
		{"variable value too long", specJSON(id, vars(`{"key":"A","value":"`+secretMark+strings.Repeat("v", MaxValueBytes)+`"}`)), "variables[0].value"},
		{"env variable over MAX_ARG_STRLEN", specJSON(id, vars(`{"key":"A","value":"`+secretMark+strings.Repeat("v", MaxEnvString)+`"}`)), "variables[0].value"},
		{"token over MAX_ARG_STRLEN", specJSON(id, `"token":"`+secretMark+strings.Repeat("t", MaxEnvString)+`"`), "token"},
		{"variable value number", specJSON(id, vars(`{"key":"A","value":42}`)), "variables[0].value"},
		{"variable masked string", specJSON(id, vars(`{"key":"A","masked":"yes"}`)), "variables[0].masked"},
		{"variable file number", specJSON(id, vars(`{"key":"A","file":1}`)), "variables[0].file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpec([]byte(tc.input))
			require.Error(t, err)
			require.Nil(t, s)
			var se *SpecError
			require.True(t, errors.As(err, &se), "error %T is not a *SpecError", err)
			require.Equal(t, tc.field, se.Field, "error: %v", err)
			require.NotEmpty(t, se.Reason)
			require.NotContains(t, err.Error(), secretMark)
			require.NotContains(t, err.Error(), "s3cr3t")
		})
	}
}

func TestSpecErrorMessage(t *testing.T) {
	require.Equal(t, "job spec: variables[3].key: not a POSIX name",
		(&SpecError{Field: "variables[3].key", Reason: "not a POSIX name"}).Error())
	require.Equal(t, "job spec: not a JSON object", (&SpecError{Reason: "not a JSON object"}).Error())

	_, err := ParseSpec([]byte(`{"id":"job-1"} ` + secretMark))
	require.EqualError(t, err, "job spec: not valid JSON (error at byte offset 16)")
}

func TestParseSpecDoesNotAliasInput(t *testing.T) {
	input := []byte(specJSON(`"id":"j"`, `"token":"`+secretMark+`"`, vars(`{"key":"A","value":"`+secretMark+`"}`)))
	orig := string(input)
	s, err := ParseSpec(input)
	require.NoError(t, err)
	s.Wipe()
	require.Equal(t, orig, string(input), "ParseSpec or Wipe changed the caller's buffer")
}

func TestSpecWipeZeroesBytes(t *testing.T) {
	input := specJSON(`"id":"j"`, `"token":"`+secretMark+`"`,
		vars(`{"key":"A","value":"`+secretMark+`-a"}`, `{"key":"B","value":"`+secretMark+`-b","file":true}`))
	s, err := ParseSpec([]byte(input))
	require.NoError(t, err)

	tok := s.Token.b
	a, b := s.Variables[0].Value.b, s.Variables[1].Value.b
	varsBacking := s.Variables[:cap(s.Variables)]
	require.Equal(t, secretMark, string(tok))
	require.Equal(t, secretMark+"-a", string(a))

	s.Wipe()
	for _, buf := range [][]byte{tok, a, b} {
		require.NotEmpty(t, buf)
		require.Equal(t, make([]byte, len(buf)), buf, "secret bytes not zeroed")
	}
	require.Nil(t, s.Variables)
	require.Zero(t, s.Token.Len())
	for _, v := range varsBacking {
		require.Equal(t, Variable{}, v, "variable slice not cleared")
	}
	s.Wipe() // idempotent
	var nilSpec *Spec
	nilSpec.Wipe()
}

func TestEnv(t *testing.T) {
	s := &Spec{
		ID:    "j",
		Token: NewSecret([]byte("tok")),
		Variables: []Variable{
			{Key: "A", Value: NewSecret([]byte("a=1"))},
			{Key: "CI_JOB_TOKEN", Value: NewSecret([]byte("shadowed"))},
			{Key: "F", Value: NewSecret([]byte("file content")), File: true},
			{Key: "E"},
		},
	}
	require.Equal(t, []string{"A=a=1", "F=/run/warmpod/j/F", "E=", "CI_JOB_TOKEN=tok"}, s.Env("CI_JOB_TOKEN", "/run/warmpod/j"))
	require.Equal(t, []string{"A=a=1", "CI_JOB_TOKEN=shadowed", "F=/d/F", "E="}, s.Env("", "/d/"))
	empty := &Spec{ID: "j"}
	require.Equal(t, []string{"T="}, empty.Env("T", "/d"))
	require.Empty(t, empty.Env("", "/d"))
}

// TestSecretUnmarshalJSON compares Secret.UnmarshalJSON with encoding/json
// decoding into a string, on inputs where both must agree.
func TestSecretUnmarshalJSON(t *testing.T) {
	good := []string{
		`""`, `"abc"`, `"\"\\\/\b\f\n\r\t"`, `"\u0041\u00e9\u20ac"`, `"\ud83d\ude00"`,
		`"\uD83D\uDE00x"`, `"\ud800"`, `"\udc00\ud800"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`,
		`"h\u00e9 😀 日本"`, `"\u0000"`, `"'$(id)` + "`x`" + `"`,
	}
	for _, in := range good {
		var want string
		require.NoError(t, json.Unmarshal([]byte(in), &want), in)
		var s Secret
		require.NoError(t, s.UnmarshalJSON([]byte(in)), in)
		require.Equal(t, want, s.Reveal(), in)
		// Also through encoding/json.
		var via Secret
		require.NoError(t, json.Unmarshal([]byte(in), &via), in)
		require.Equal(t, want, via.Reveal(), in)
	}

	bad := []string{``, `"`, `abc`, `"abc`, `abc"`, `"a"b"`, `"\x"`, `"\u12"`, `"\u12G4"`, `"\"`, "\"a\nb\"", "\"a\x01\"", `1`, `true`, `{}`}
	for _, in := range bad {
		s := NewSecret([]byte("keep"))
		err := s.UnmarshalJSON([]byte(in))
		require.Error(t, err, "%q", in)
		require.Equal(t, "keep", s.Reveal(), "a failed decode must leave the secret alone")
	}

	// null is a no-op; a new value replaces and wipes the old one.
	old := []byte("old")
	s := NewSecret(old)
	require.NoError(t, s.UnmarshalJSON([]byte(`null`)))
	require.Equal(t, "old", s.Reveal())
	require.NoError(t, s.UnmarshalJSON([]byte(`"new"`)))
	require.Equal(t, "new", s.Reveal())
	require.Equal(t, []byte{0, 0, 0}, old)

	// Bytes that are not UTF-8 are kept as they are.
	require.NoError(t, s.UnmarshalJSON([]byte("\"\xff\xfe\"")))
	require.Equal(t, "\xff\xfe", s.Reveal())
}

// TestParseSpecHostile is the hostile-executor table of issue 10: each
// input is refused with the field named (and never a value echoed), or,
// for a token full of shell syntax, accepted and rendered inert.
func TestParseSpecHostile(t *testing.T) {
	vars := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"id":"a","variables":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"key":"V%d","value":"x"}`, i)
		}
		b.WriteString("]}")
		return b.String()
	}
	for _, tc := range []struct {
		name, in, field string
	}{
		{"duplicate top-level key", `{"id":"a","id":"b"}`, "id"},
		{"duplicate variable key", `{"id":"a","variables":[{"key":"A"},{"key":"A"}]}`, "variables[1].key"},
		{"duplicate member in a variable", `{"id":"a","variables":[{"key":"A","key":"B"}]}`, "variables[0].key"},
		{"non-POSIX name", `{"id":"a","variables":[{"key":"A-B"}]}`, "variables[0].key"},
		{"name starting with a digit", `{"id":"a","variables":[{"key":"1A"}]}`, "variables[0].key"},
		{"name with a NUL", `{"id":"a","variables":[{"key":"A\u0000B"}]}`, "variables[0].key"},
		{"NUL in a value", `{"id":"a","variables":[{"key":"A","value":"x\u0000y"}]}`, "variables[0].value"},
		{"NUL in the token", `{"id":"a","token":"x\u0000y"}`, "token"},
		{"10 MB value", `{"id":"a","variables":[{"key":"A","value":"` + strings.Repeat("x", 10<<20) + `"}]}`, ""},
		{"100,000 variables", vars(100_000), ""},
		{"1,001 variables", vars(MaxVariables + 1), "variables"},
		{"deep nesting", `{"id":"a","variables":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`, ""},
		{"nesting in a value", `{"id":"a","variables":[{"key":"A","value":{"x":[[[]]]}}]}`, "variables[0].value"},
		{"wrong type: id", `{"id":5}`, "id"},
		{"wrong type: variables", `{"id":"a","variables":{"A":"b"}}`, "variables"},
		{"wrong type: file", `{"id":"a","variables":[{"key":"A","file":"yes"}]}`, "variables[0].file"},
		{"wrong type: timeout", `{"id":"a","timeout":3600}`, "timeout"},
		{"trailing garbage", `{"id":"a"} {"id":"b"}`, ""},
		{"trailing garbage after newline", "{\"id\":\"a\"}\nrm -rf /", ""},
		{"id escaping the jobs directory", `{"id":"../../etc"}`, "id"},
		{"not an object", `["id","a"]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpec([]byte(tc.in))
			require.Error(t, err)
			require.Nil(t, s)
			se, ok := err.(*SpecError)
			require.True(t, ok, "%T", err)
			require.Equal(t, tc.field, se.Field, err.Error())
			require.Less(t, len(err.Error()), 300, "the error echoes the input")
		})
	}

	token := "line1\nline2'\"$(touch /tmp/pwned)`id`;|&<>*?[]{}~#!\\"
	raw, err := json.Marshal(map[string]any{"id": "a", "token": token})
	require.NoError(t, err)
	s, err := ParseSpec(raw)
	require.NoError(t, err)
	defer s.Wipe()
	require.Equal(t, token, s.Token.Reveal())
	for _, sh := range shells(t) {
		require.Equal(t, token, shellRoundTrip(t, sh, token), sh)
	}
}
