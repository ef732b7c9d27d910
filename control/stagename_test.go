package control

import (
	"regexp"
	"strings"
	"testing"
)

// The hand-written check accepts exactly what the equivalent regexp
// accepts.
func TestValidStageNameMatchesTheRegexp(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	cases := []string{"", "a", "build", "Build_1.2-x", ".x", "_x", "-x", "a/b", "a b", "a\n", "é", "a\x00",
		strings.Repeat("a", 128), strings.Repeat("a", 129), "9" + strings.Repeat(".", 127)}
	for _, c := range cases {
		if got, want := ValidStageName(c), re.MatchString(c); got != want {
			t.Errorf("ValidStageName(%q) = %v, the regexp says %v", c, got, want)
		}
	}
}

func FuzzValidStageName(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	for _, s := range []string{"a", "-a", "a.b_c-d", strings.Repeat("z", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidStageName(s), re.MatchString(s); got != want {
			t.Fatalf("ValidStageName(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}
