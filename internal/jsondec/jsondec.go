// Package jsondec decodes the few fixed JSON documents PID 1 reads (control
// requests and responses, stage and job status, a multiplexer's open frame,
// the API server's answers) without encoding/json's reflection-based
// decoder: PID 1's binary was 57,344 B smaller once none of its packages
// called it (issue 30; the encoder stays: log/slog links it). A document's
// type lists its members as Fields, each a name and a pointer to where its
// value goes; one type switch decodes every kind of value (a closure made
// per member cost PID 1 8 KB more).
//
// The rules are encoding/json.Unmarshal's for the Go types Value lists (the
// fuzz tests compare the two): the input must be one valid JSON value
// (json.Valid); a member name matches a field exactly, or else after
// upper-casing both (encoding/json's case folding); unknown members are
// ignored; null leaves a string, number, bool, time or struct as it is and
// sets a slice or pointer to nil; a value of another JSON type is an error;
// a member given twice decodes into what the first one left (a slice's
// elements are reused, as encoding/json does). Unlike encoding/json, the
// first error ends the decoding: on error the destination is partly filled
// and should be dropped.
package jsondec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// Func decodes one JSON value into the variable it was made for (a nested
// object, a slice of them). v is whole and without surrounding whitespace;
// Unmarshal and Value check that the document is valid JSON before any
// Func sees part of it.
type Func func(v []byte) error

// Field is one member of a JSON object: its name (as in a json struct tag)
// and where its value goes.
type Field struct {
	// Name is the member's name.
	Name string
	// Dst is where the value goes; its type says how the value is
	// decoded (see Value).
	Dst any
}

// Member is the Field for the member name decoded into dst (see Value).
func Member(name string, dst any) Field { return Field{Name: name, Dst: dst} }

// errSyntax is returned for a document json.Valid refuses.
var errSyntax = errors.New("jsondec: not valid JSON")

// Unmarshal decodes the JSON object data into fields (null: nothing is
// decoded). Errors: data is not valid JSON, not an object or null, or a
// member's value does not fit its field.
func Unmarshal(data []byte, fields ...Field) error {
	return Value(data, Object(fields...))
}

// Value checks that data is one valid JSON value and decodes it into dst:
// a *string, *bool, *int, *int64 (an integer without fraction or exponent,
// as encoding/json wants for Go integers), *[]string, *json.RawMessage
// (any value, null included, copied), *time.Time (RFC 3339, time.Time's
// UnmarshalJSON), **int, **int64, **time.Time (allocated when nil; null
// sets nil) or a Func. Errors: data is not valid JSON, or the value does
// not fit dst.
func Value(data []byte, dst any) error {
	if !json.Valid(data) {
		return errSyntax
	}
	i, j := 0, len(data)
	for i < j && isSpace(data[i]) {
		i++
	}
	for j > i && isSpace(data[j-1]) {
		j--
	}
	return decode(dst, data[i:j])
}

// decode decodes the value v into dst (Value's types).
func decode(dst any, v []byte) error {
	switch d := dst.(type) {
	case Func:
		return d(v)
	case *string:
		return decodeString(d, v)
	case *bool:
		return decodeBool(d, v)
	case *int:
		return decodeInt(d, v)
	case *int64:
		return decodeInt64(d, v)
	case *[]string:
		return Slice(d, func(s *string) Func { return func(v []byte) error { return decodeString(s, v) } })(v)
	case *json.RawMessage:
		*d = append((*d)[:0], v...)
		return nil
	case *time.Time:
		return d.UnmarshalJSON(v)
	case **int:
		return decodePtr(d, v, decodeInt)
	case **int64:
		return decodePtr(d, v, decodeInt64)
	case **time.Time:
		return decodePtr(d, v, (*time.Time).UnmarshalJSON)
	}
	return fmt.Errorf("jsondec: cannot decode into %T", dst)
}

// Object decodes a JSON object into fields, in input order.
func Object(fields ...Field) Func {
	return func(v []byte) error {
		if isNull(v) {
			return nil
		}
		if len(v) == 0 || v[0] != '{' {
			return typeError(v, "an object")
		}
		return members(v, func(key string, val []byte) error {
			f := match(fields, key)
			if f == nil {
				return nil
			}
			if err := decode(f.Dst, val); err != nil {
				return errors.New("jsondec: member " + strconv.Quote(f.Name) + ": " + err.Error())
			}
			return nil
		})
	}
}

// match finds the field named key: exactly, or else case-folded as
// encoding/json folds (each rune upper-cased). nil: no such field.
func match(fields []Field, key string) *Field {
	for i := range fields {
		if fields[i].Name == key {
			return &fields[i]
		}
	}
	fk := strings.ToUpper(key)
	for i := range fields {
		if strings.ToUpper(fields[i].Name) == fk {
			return &fields[i]
		}
	}
	return nil
}

// decodeString decodes a JSON string into dst.
func decodeString(dst *string, v []byte) error {
	if isNull(v) {
		return nil
	}
	s, ok := unquote(v)
	if !ok {
		return typeError(v, "a string")
	}
	*dst = s
	return nil
}

// decodeBool decodes true or false into dst.
func decodeBool(dst *bool, v []byte) error {
	switch string(v) {
	case "null":
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return typeError(v, "a boolean")
	}
	return nil
}

// decodeInt64 decodes a JSON number written as an integer into dst.
func decodeInt64(dst *int64, v []byte) error {
	if isNull(v) {
		return nil
	}
	if !isNumber(v) {
		return typeError(v, "an integer")
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return errors.New("jsondec: number " + string(v) + " is not a 64-bit integer")
	}
	*dst = n
	return nil
}

// decodeInt is decodeInt64 for an int (64 bits where warmpod runs;
// elsewhere a number out of int's range is an error).
func decodeInt(dst *int, v []byte) error {
	n := int64(*dst)
	if err := decodeInt64(&n, v); err != nil {
		return err
	}
	if int64(int(n)) != n {
		return errors.New("jsondec: number " + string(v) + " overflows int")
	}
	*dst = int(n)
	return nil
}

// decodePtr decodes v into *dst with elem, allocating it when nil; null
// sets *dst to nil.
func decodePtr[T any](dst **T, v []byte, elem func(*T, []byte) error) error {
	if isNull(v) {
		*dst = nil
		return nil
	}
	if *dst == nil {
		*dst = new(T)
	}
	return elem(*dst, v)
}

// Slice decodes a JSON array into dst, one element with elem each. As in
// encoding/json, the elements decode into the ones dst's backing array
// already holds (so null leaves one as it was), [] is an empty non-nil
// slice and null sets dst to nil.
func Slice[T any](dst *[]T, elem func(*T) Func) Func {
	return func(v []byte) error {
		if isNull(v) {
			*dst = nil
			return nil
		}
		if len(v) == 0 || v[0] != '[' {
			return typeError(v, "an array")
		}
		s := *dst
		n := 0
		err := elements(v, func(val []byte) error {
			if n < cap(s) {
				s = s[:n+1]
			} else {
				var zero T
				s = append(s, zero)
			}
			n++
			return elem(&s[n-1])(val)
		})
		if n == 0 {
			s = []T{}
		}
		*dst = s[:n]
		return err
	}
}

// typeError says which JSON type v is and what was expected.
func typeError(v []byte, want string) error {
	kind := "value"
	if len(v) > 0 {
		switch c := v[0]; {
		case c == '"':
			kind = "string"
		case c == '{':
			kind = "object"
		case c == '[':
			kind = "array"
		case c == 't' || c == 'f':
			kind = "boolean"
		case c == '-' || '0' <= c && c <= '9':
			kind = "number"
		}
	}
	return errors.New("jsondec: a JSON " + kind + " where " + want + " belongs")
}

// isNull says whether v is the literal null.
func isNull(v []byte) bool { return string(v) == "null" }

// isNumber says whether v starts like a JSON number.
func isNumber(v []byte) bool {
	return len(v) > 0 && (v[0] == '-' || '0' <= v[0] && v[0] <= '9')
}

// unquote decodes the JSON string literal q as encoding/json does: escapes
// decoded, a UTF-16 surrogate pair to one rune and any other surrogate
// escape to U+FFFD, each byte of invalid UTF-8 to U+FFFD. ok is false when
// q is not a string literal.
func unquote(q []byte) (string, bool) {
	if len(q) < 2 || q[0] != '"' || q[len(q)-1] != '"' {
		return "", false
	}
	in := q[1 : len(q)-1]
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		switch {
		case c == '"' || c < 0x20:
			return "", false
		case c == '\\':
			n, ok := 0, false
			if out, n, ok = unescape(out, in[i:]); !ok {
				return "", false
			}
			i += n
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(in[i:])
			out = utf8.AppendRune(out, r)
			i += n
		}
	}
	return string(out), true
}

// Unescape appends the JSON escape sequence at the start of in (in[0] is a
// backslash) to out, decoded as encoding/json does (a UTF-16 surrogate
// pair to one rune, any other surrogate escape to U+FFFD); n is how many
// bytes of in it took, ok is false if in does not start with an escape. It
// appends fewer bytes than it takes, so an out with room for the whole
// string never grows: jobspec's Secret relies on that to leave no copy of a
// secret behind.
func Unescape(out, in []byte) (_ []byte, n int, ok bool) { return unescape(out, in) }

// unescape is Unescape.
func unescape(out, in []byte) (_ []byte, n int, ok bool) {
	if len(in) < 2 {
		return out, 0, false
	}
	switch in[1] {
	case '"', '\\', '/':
		return append(out, in[1]), 2, true
	case 'b':
		return append(out, '\b'), 2, true
	case 'f':
		return append(out, '\f'), 2, true
	case 'n':
		return append(out, '\n'), 2, true
	case 'r':
		return append(out, '\r'), 2, true
	case 't':
		return append(out, '\t'), 2, true
	case 'u':
	default:
		return out, 0, false
	}
	r, ok := hex4(in[2:])
	if !ok {
		return out, 0, false
	}
	n = 6
	if utf16.IsSurrogate(r) {
		// A pair decodes to one rune; anything else to U+FFFD, and the
		// next escape is decoded on its own.
		dec := utf8.RuneError
		if len(in) >= 12 && in[6] == '\\' && in[7] == 'u' {
			if r2, ok := hex4(in[8:]); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					dec, n = d, 12
				}
			}
		}
		r = dec
	}
	return utf8.AppendRune(out, r), n, true
}

// hex4 decodes the four hex digits at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
