package jsondec

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMembersAndElements: the exported walkers take whitespace around the
// value, refuse what is not an object or array (never a panic), and hand
// fn's error back unchanged; jobspec tells the two apart by that.
func TestMembersAndElements(t *testing.T) {
	stop := errors.New("stop")
	for _, tc := range []struct {
		name, in string
		array    bool     // Elements, else Members
		want     []string // keys or raw elements seen
		err      error    // nil, errMalformed or stop
	}{
		{"object", " {\"a\": 1, \"b\\u00e9\" :[2] } ", false, []string{"a=1", "bé=[2]"}, nil},
		{"empty object", "{}", false, nil, nil},
		{"array", "\n[1, \"x\" ,{}]", true, []string{"1", `"x"`, "{}"}, nil},
		{"empty array", "[ ]", true, nil, nil},
		{"not an object", `"a"`, false, nil, errMalformed},
		{"empty", "", false, nil, errMalformed},
		{"cut object", `{"a":`, false, nil, errMalformed},
		{"cut array", `[1,`, true, []string{"1"}, errMalformed},
		{"bad key", `{"a\x": 1}`, false, nil, errMalformed},
		{"fn fails", `{"stop": 1, "b": 2}`, false, []string{"stop=1"}, stop},
		{"fn fails in array", `["stop", 2]`, true, []string{`"stop"`}, stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			var err error
			if !tc.array {
				err = Members([]byte(tc.in), func(k string, v []byte) error {
					seen = append(seen, k+"="+string(v))
					if k == "stop" {
						return stop
					}
					return nil
				})
			} else {
				err = Elements([]byte(tc.in), func(v []byte) error {
					seen = append(seen, string(v))
					if string(v) == `"stop"` {
						return stop
					}
					return nil
				})
			}
			require.ErrorIs(t, err, tc.err)
			if tc.err == nil {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, seen)
		})
	}
}
