// Package jsonenc writes the few fixed JSON documents PID 1 sends (control
// requests and responses, stage and job status, multiplexer frames, the
// termination message, the API server's delete options) without
// encoding/json's reflection-based encoder: with internal/jsondec on the
// reading side and internal/initlog for its logs, PID 1's binary no longer
// links that encoder or log/slog, which was the bulk of the 0.25 MB the
// size target of issue 30 asked for.
//
// The output is byte for byte what encoding/json.Marshal writes for the
// same Go value (its tests compare the two, fuzzed): strings are escaped
// with Marshal's rules, HTML's <, > and & included; a RawMessage is
// compacted and HTML-escaped; a time is time.Time's MarshalJSON. Each
// document type lists its members in its own AppendJSON method, in the
// order of its struct fields, leaving out what its omitempty tag would.
//
// A second benefit: Marshal's buffers are pooled and reused, so a job
// spec's secrets could outlive the call in memory no one clears; these
// functions append to the caller's slice only, which the caller clears.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// hex is the lower-case hexadecimal digits of a \u00XX escape.
const hex = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json.Marshal
// escapes it: ", \ and control bytes (\b, \f, \n, \r, \t by name, the rest
// as \u00XX), <, > and & as \u003c, \u003e, \u0026 (so the text can sit
// in HTML), U+2028 and U+2029 (JSONP), and each byte of invalid UTF-8 as
// \ufffd.
func AppendString(b []byte, s string) []byte { return appendString(b, s, escapeMarshal) }

// AppendStringNoHTML is AppendString with <, > and & as they are, as an
// encoding/json Encoder with SetEscapeHTML(false) writes a string.
func AppendStringNoHTML(b []byte, s string) []byte { return appendString(b, s, escapeNoHTML) }

// AppendLogString appends s as log/slog's JSON handler writes a string:
// as AppendStringNoHTML, but \b and \f as \u0008 and \u000c
// (internal/initlog's JSON lines).
func AppendLogString(b []byte, s string) []byte { return appendString(b, s, escapeSlog) }

// escaping is one of the three string escapings above.
type escaping int

const (
	escapeMarshal escaping = iota // encoding/json.Marshal
	escapeNoHTML                  // Encoder.SetEscapeHTML(false)
	escapeSlog                    // log/slog's JSON handler
)

// appendString appends s quoted and escaped (see AppendString) in mode e.
func appendString(b []byte, s string, e escaping) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			esc := escapeASCII(c, e)
			if esc == "" {
				i++
				continue
			}
			b = append(append(b, s[start:i]...), esc...)
			if esc == `\u00` {
				b = append(b, hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), `\u202`...)
			b = append(b, hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

// escapeASCII returns what an ASCII byte is written as inside a JSON
// string in mode e: "" for itself, a two-byte escape, or `\u00` to be
// followed by its two hex digits.
func escapeASCII(c byte, e escaping) string {
	switch c {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\b':
		if e != escapeSlog {
			return `\b`
		}
		return `\u00`
	case '\f':
		if e != escapeSlog {
			return `\f`
		}
		return `\u00`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	case '<', '>', '&':
		if e == escapeMarshal {
			return `\u00`
		}
		return ""
	}
	if c < 0x20 { // DEL (0x7f) is written as it is, as encoding/json does
		return `\u00`
	}
	return ""
}

// AppendStrings appends ss as a JSON array of strings; nil as null, as
// encoding/json writes a nil slice.
func AppendStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}

// AppendTime appends t as time.Time.MarshalJSON writes it: RFC 3339 with
// nanoseconds, quoted. Unlike encoding/json, a year outside [0, 9999] is
// written as it is instead of failing the whole document: PID 1's times
// come from its clock.
func AppendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendRaw appends a json.RawMessage as encoding/json.Marshal does: nil
// (or empty) as null, else compacted and HTML-escaped. Raw text that is
// not valid JSON is written as null: encoding/json would fail the whole
// document, and PID 1's raw documents are its own or were checked by
// json.Valid when they arrived.
func AppendRaw(b []byte, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return append(b, "null"...)
	}
	var h bytes.Buffer
	json.HTMLEscape(&h, c.Bytes())
	b = append(b, h.Bytes()...)
	clear(c.Bytes()) // a job spec holds secrets
	clear(h.Bytes())
	return b
}

// Object appends one JSON object's members, in the order they are added.
// The zero Object is not ready: start one with NewObject.
type Object struct {
	b    []byte
	more bool
}

// NewObject starts an object at the end of b.
func NewObject(b []byte) Object { return Object{b: append(b, '{')} }

// key appends the separator and the member's name.
func (o *Object) key(name string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(AppendString(o.b, name), ':')
}

// String adds the member name with a string value.
func (o *Object) String(name, v string) {
	o.key(name)
	o.b = AppendString(o.b, v)
}

// OmitEmpty adds the member name with a string value unless v is empty,
// as a field tagged omitempty.
func (o *Object) OmitEmpty(name, v string) {
	if v != "" {
		o.String(name, v)
	}
}

// Int adds the member name with an integer value.
func (o *Object) Int(name string, v int64) {
	o.key(name)
	o.b = strconv.AppendInt(o.b, v, 10)
}

// Uint adds the member name with an unsigned integer value.
func (o *Object) Uint(name string, v uint64) {
	o.key(name)
	o.b = strconv.AppendUint(o.b, v, 10)
}

// Bool adds the member name with true or false.
func (o *Object) Bool(name string, v bool) {
	o.key(name)
	o.b = strconv.AppendBool(o.b, v)
}

// Time adds the member name with a time (AppendTime).
func (o *Object) Time(name string, t time.Time) {
	o.key(name)
	o.b = AppendTime(o.b, t)
}

// Strings adds the member name with an array of strings (AppendStrings).
func (o *Object) Strings(name string, ss []string) {
	o.key(name)
	o.b = AppendStrings(o.b, ss)
}

// Raw adds the member name with a raw JSON value (AppendRaw).
func (o *Object) Raw(name string, raw []byte) {
	o.key(name)
	o.b = AppendRaw(o.b, raw)
}

// Null adds the member name with null (a nil pointer without omitempty).
func (o *Object) Null(name string) {
	o.key(name)
	o.b = append(o.b, "null"...)
}

// Value adds the member name with the value appendValue appends (a nested
// document's AppendJSON).
func (o *Object) Value(name string, appendValue func([]byte) []byte) {
	o.key(name)
	o.b = appendValue(o.b)
}

// End closes the object and returns the whole slice, what was before
// NewObject's b included.
func (o *Object) End() []byte { return append(o.b, '}') }

// Appender is a document that appends itself as JSON (its AppendJSON
// method), as encoding/json.Marshal would write it.
type Appender interface {
	AppendJSON(b []byte) []byte
}
