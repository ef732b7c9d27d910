package shquote

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	tests := map[string]string{
		"":      `''`,
		"a":     `'a'`,
		"it's":  `'it'\''s'`,
		"'":     `''\'''`,
		"$(id)": `'$(id)'`,
		"a\nb":  "'a\nb'",
	}
	for in, want := range tests {
		require.Equal(t, want, Quote(in), "%q", in)
	}
}

// Len is the length Quote gives, so a caller can size a buffer it wipes.
func TestLen(t *testing.T) {
	for _, s := range []string{"", "a", "it's", "''", "a'b'c"} {
		require.Equal(t, len(Quote(s)), Len(s), "%q", s)
	}
}
