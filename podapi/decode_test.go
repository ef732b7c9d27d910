package podapi

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The answers PID 1 reads from the API server are decoded with
// internal/jsondec (PID 1's size, issue 30); these tests compare them with
// the encoding/json decoding they replaced.

// statusMessageJSON is statusMessage as it was with encoding/json.
func statusMessageJSON(raw []byte) string {
	var s struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	if json.Unmarshal(raw, &s) == nil && s.Message != "" {
		return s.Message
	}
	m := strings.TrimSpace(string(raw))
	if len(m) > 200 {
		m = m[:200] + "..."
	}
	return strings.ToValidUTF8(m, "?")
}

// serviceAccountOfJSON is serviceAccountOf as it was with encoding/json.
func serviceAccountOfJSON(token string) string {
	const fallback = "the pod's service account"
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fallback
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return fallback
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil || !strings.HasPrefix(claims.Sub, "system:serviceaccount:") {
		return fallback
	}
	f := strings.Split(strings.TrimPrefix(claims.Sub, "system:serviceaccount:"), ":")
	if len(f) != 2 {
		return fallback
	}
	return fmt.Sprintf("service account %s (%s)", f[1], claims.Sub)
}

var statusBodies = []string{
	`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"p\" is forbidden","reason":"Forbidden","code":403}`,
	`{"message":"m","reason":7}`, `{"message":""}`, `{"Message":"folded"}`, `{"message":"a\u00e9\ud800"}`,
	`not json`, `  padded  `, strings.Repeat("x", 300), "\xff\xfe", `{"message":["a"]}`, `null`, ``,
}

func TestStatusMessageAgrees(t *testing.T) {
	for _, b := range statusBodies {
		require.Equal(t, statusMessageJSON([]byte(b)), statusMessage([]byte(b)), "%q", b)
	}
}

func FuzzStatusMessage(f *testing.F) {
	for _, b := range statusBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		require.Equal(t, statusMessageJSON(raw), statusMessage(raw))
	})
}

// jwtWith is a token whose payload is claims (the signature is not read).
func jwtWith(claims string) string {
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
}

var claimSets = []string{
	`{"sub":"system:serviceaccount:ci:warmpod","aud":["x"]}`, `{"sub":"system:serviceaccount:ci"}`,
	`{"SUB":"system:serviceaccount:a:b"}`, `{"sub":1}`, `{"sub":null}`, `{}`, `[]`, `{"sub":"alice"}`,
	`{"sub":"system:serviceaccount:a:b","sub":"system:serviceaccount:c:d"}`, `{`,
}

func TestServiceAccountOfAgrees(t *testing.T) {
	for _, c := range claimSets {
		tok := jwtWith(c)
		require.Equal(t, serviceAccountOfJSON(tok), serviceAccountOf(tok), "%s", c)
	}
}

func FuzzServiceAccountOf(f *testing.F) {
	for _, c := range claimSets {
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, claims string) {
		tok := jwtWith(claims)
		require.Equal(t, serviceAccountOfJSON(tok), serviceAccountOf(tok))
	})
}
