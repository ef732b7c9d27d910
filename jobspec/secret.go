package jobspec

import (
	"errors"
	"fmt"
	"io"

	"github.com/warmpod/warmpod/internal/jsondec"
)

// redacted is what every printing and encoding path shows instead of a
// secret.
const redacted = "[redacted]"

// Secret holds sensitive bytes: the job token or a variable's value.
//
// String, GoString, Format (every verb, including %v %+v %#v %s %q %x),
// MarshalText and MarshalJSON all produce "[redacted]" (as a JSON
// string for MarshalJSON), so a Secret, and any struct holding one in an
// exported field, can be printed, logged or JSON-encoded without leaking the
// value. Use [Secret.Reveal] to get the clear value.
//
// The zero value is an empty secret. Copies of a Secret share the same
// bytes: wiping one copy zeroes the bytes seen through all of them.
type Secret struct{ b []byte }

// NewSecret returns a Secret holding b. It takes ownership of b: b is not
// copied, and the caller must not use or modify it afterwards except through
// the Secret ([Secret.Wipe] zeroes it in place).
func NewSecret(b []byte) Secret { return Secret{b: b} }

// Reveal returns the clear value. It is meant only for building the job's
// environment. The returned Go string is a copy that [Secret.Wipe] cannot
// reach (Go strings are immutable), so keep it short-lived and never log it.
func (s Secret) Reveal() string { return string(s.b) }

// Len returns the length of the secret in bytes (0 for the zero value and
// after [Secret.Wipe]).
func (s Secret) Len() int { return len(s.b) }

// Wipe overwrites the secret's bytes with zeros (the builtin clear) and
// drops them, leaving an empty secret. It is safe on the zero value and on a
// nil *Secret.
func (s *Secret) Wipe() {
	if s == nil {
		return
	}
	clear(s.b)
	s.b = nil
}

// String implements fmt.Stringer and returns "[redacted]".
func (s Secret) String() string { return redacted }

// GoString implements fmt.GoStringer (the %#v verb) and returns
// "[redacted]".
func (s Secret) GoString() string { return redacted }

// Format implements fmt.Formatter: every verb, flag, width and precision
// prints "[redacted]". It takes precedence over String and GoString in the
// fmt package, so %x, %q or %d cannot reach the bytes either.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// MarshalText implements encoding.TextMarshaler and returns "[redacted]".
// It never fails.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// MarshalJSON implements json.Marshaler and returns the JSON string
// "[redacted]". It never fails. There is deliberately no way to JSON-encode
// the clear value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// UnmarshalJSON implements json.Unmarshaler. It decodes a JSON string (RFC
// 8259, section 7) straight into a []byte allocated once at its final
// capacity, so no Go string and no re-grown buffer ever holds the value.
// Any previous value is wiped first. The JSON literal null is a no-op, as
// the encoding/json convention asks.
//
// Unlike encoding/json, bytes that are not valid UTF-8 are kept as they are
// instead of being replaced by U+FFFD; an unpaired UTF-16 surrogate escape
// (\uD800) decodes to U+FFFD as in encoding/json. The escape \u0000 yields a
// NUL byte; [ParseSpec] rejects it, this method does not.
//
// It returns an error if data is not a single JSON string. The error never
// contains any part of data.
func (s *Secret) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	b, ok := unquoteJSON(data)
	if !ok {
		return errors.New("jobspec: secret is not a valid JSON string")
	}
	s.Wipe()
	s.b = b
	return nil
}

// unquoteJSON decodes the JSON string literal q into a new []byte. The
// result never needs to grow: every escape decodes to fewer bytes than it
// takes in q. On failure the partial result is wiped and ok is false.
func unquoteJSON(q []byte) (out []byte, ok bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return nil, false
	}
	in := q[1 : len(q)-1]
	out = make([]byte, 0, len(in))
	fail := func() ([]byte, bool) {
		clear(out[:cap(out)])
		return nil, false
	}
	for i := 0; i < len(in); {
		switch c := in[i]; {
		case c == '"' || c < 0x20:
			// An unescaped quote ends the string early; raw control
			// characters are not allowed in a JSON string.
			return fail()
		case c != '\\':
			out = append(out, c)
			i++
		default:
			// jsondec's escapes are encoding/json's, and each decodes to
			// fewer bytes than it takes: out never grows, so no copy of
			// the secret is left in a dropped array.
			n := 0
			if out, n, ok = jsondec.Unescape(out, in[i:]); !ok {
				return fail()
			}
			i += n
		}
	}
	return out, true
}
