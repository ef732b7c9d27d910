// Package initlog is PID 1's logger: the lines log/slog's text and JSON
// handlers write, without linking log/slog, whose handlers, Record and
// Value machinery and the encoding/json encoder its JSON handler calls
// made up about 0.25 MB of PID 1's binary with internal/jsonenc's share
// (issue 30 asks for a binary of at most 5.5 MB). Its tests compare its
// lines with log/slog's for every kind of value PID 1 logs.
//
// A line is time, level, msg, the attributes of With, then the call's own:
// key-value pairs as log/slog takes them (a string key and its value; a
// key without a value, or a value where a key should be, is logged under
// "!BADKEY"). Values are written as log/slog writes them: strings,
// integers, floats, bools, time.Duration, time.Time, errors,
// encoding.TextMarshaler (text) and json.Marshaler (JSON), fmt's %+v for
// the rest. Two choices differ from log/slog's defaults, on purpose, and
// were PID 1's before this package: the JSON format writes a
// time.Duration as "1m30s" as the text format, the flags and the job spec
// do, not as integer nanoseconds; and a value of another type is a JSON
// string of its %+v (or a number or bool when its kind is one) instead of
// encoding/json's reflection.
package initlog

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/warmpod/warmpod/internal/jsonenc"
)

// Level is a log line's severity; the values are log/slog's, so a level
// prints the same ("DEBUG", "INFO", "WARN", "ERROR", "DEBUG-4").
type Level int

// The levels PID 1 logs at, and the --log-level flag's trace and off.
const (
	// LevelTrace is below debug, as hclog's trace was: the flag keeps
	// accepting it (nothing logs at it today).
	LevelTrace Level = -8
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
	// LevelOff is above every level PID 1 logs at.
	LevelOff Level = 108
)

// String names the level as log/slog's Level.String does: the nearest
// named level at or below it, and the distance from it ("DEBUG-4").
func (l Level) String() string {
	name, base := "ERROR", LevelError
	switch {
	case l < LevelInfo:
		name, base = "DEBUG", LevelDebug
	case l < LevelWarn:
		name, base = "INFO", LevelInfo
	case l < LevelError:
		name, base = "WARN", LevelWarn
	}
	switch d := l - base; {
	case d > 0:
		return name + "+" + strconv.Itoa(int(d))
	case d < 0:
		return name + strconv.Itoa(int(d))
	}
	return name
}

// Format is a log line's format.
type Format int

const (
	// Text is log/slog's TextHandler's: key=value, quoted where needed.
	Text Format = iota
	// JSON is log/slog's JSONHandler's: one JSON object per line.
	JSON
)

// sink is where a Logger's lines go; Loggers made by With share it.
type sink struct {
	mu   sync.Mutex // one Write per line, as log/slog's handlers do
	w    io.Writer
	min  Level
	json bool
	now  func() time.Time
}

// Logger writes log lines. A nil *Logger, and Discard's, write nothing.
// It is safe for concurrent use.
type Logger struct {
	s     *sink
	attrs []byte // With's attributes, already formatted
}

// New returns a logger writing lines at min and above to w in format f,
// stamped with now (time.Now outside tests). Write errors are ignored:
// PID 1 has nowhere else to report them.
func New(w io.Writer, min Level, f Format, now func() time.Time) *Logger {
	return &Logger{s: &sink{w: w, min: min, json: f == JSON, now: now}}
}

// Discard returns a logger that writes nothing (Enabled is always false).
func Discard() *Logger { return &Logger{} }

// Enabled reports whether a line at lv would be written.
func (l *Logger) Enabled(lv Level) bool { return l != nil && l.s != nil && lv >= l.s.min }

// With returns a logger whose lines carry args (key-value pairs, as a
// call's) after the message, before the call's own.
func (l *Logger) With(args ...any) *Logger {
	if l == nil || l.s == nil {
		return l
	}
	attrs := append([]byte(nil), l.attrs...)
	return &Logger{s: l.s, attrs: l.s.appendArgs(attrs, args)}
}

// Debug logs msg and args at LevelDebug.
func (l *Logger) Debug(msg string, args ...any) { l.log(LevelDebug, msg, args) }

// Info logs msg and args at LevelInfo.
func (l *Logger) Info(msg string, args ...any) { l.log(LevelInfo, msg, args) }

// Warn logs msg and args at LevelWarn.
func (l *Logger) Warn(msg string, args ...any) { l.log(LevelWarn, msg, args) }

// Error logs msg and args at LevelError.
func (l *Logger) Error(msg string, args ...any) { l.log(LevelError, msg, args) }

// log formats one line and writes it with one Write.
func (l *Logger) log(lv Level, msg string, args []any) {
	if !l.Enabled(lv) {
		return
	}
	s := l.s
	b := make([]byte, 0, 256)
	if s.json {
		b = append(b, `{"time":`...)
		b = jsonenc.AppendTime(b, s.now())
		b = append(b, `,"level":`...)
		b = appendJSONString(b, lv.String())
		b = append(b, `,"msg":`...)
		b = appendJSONString(b, msg)
	} else {
		b = append(b, "time="...)
		b = appendRFC3339Millis(b, s.now())
		b = append(b, " level="...)
		b = appendTextString(b, lv.String())
		b = append(b, " msg="...)
		b = appendTextString(b, msg)
	}
	b = append(b, l.attrs...)
	b = s.appendArgs(b, args)
	if s.json {
		b = append(b, '}')
	}
	b = append(b, '\n')
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(b)
}

// badKey is log/slog's key for a value given where a key should be.
const badKey = "!BADKEY"

// appendArgs appends key-value pairs, each with its separator.
func (s *sink) appendArgs(b []byte, args []any) []byte {
	for len(args) > 0 {
		key, ok := args[0].(string)
		var val any
		switch {
		case !ok:
			key, val, args = badKey, args[0], args[1:]
		case len(args) == 1:
			key, val, args = badKey, key, nil
		default:
			val, args = args[1], args[2:]
		}
		b = s.appendAttr(b, key, val)
	}
	return b
}

// appendAttr appends one attribute with its separator. A pair with an
// empty key and a nil value is left out, as log/slog leaves out an empty
// Attr.
func (s *sink) appendAttr(b []byte, key string, val any) []byte {
	if key == "" && val == nil {
		return b
	}
	if s.json {
		b = appendJSONString(append(b, ','), key)
		return appendJSONValue(append(b, ':'), val)
	}
	b = appendTextString(append(b, ' '), key)
	return appendTextValue(append(b, '='), val)
}

// appendTextValue appends val as log/slog's TextHandler does.
func appendTextValue(b []byte, val any) []byte {
	if b, ok := appendNumber(b, val); ok {
		return b
	}
	switch v := val.(type) {
	case string:
		return appendTextString(b, v)
	case time.Duration:
		return append(b, v.String()...)
	case time.Time:
		return appendRFC3339Millis(b, v)
	case encoding.TextMarshaler:
		text, err := v.MarshalText()
		if err != nil {
			return append(b, "!ERROR:"+err.Error()...)
		}
		return appendTextString(b, string(text))
	case []byte:
		return strconv.AppendQuote(b, string(v))
	}
	return appendTextString(b, fmt.Sprintf("%+v", val))
}

// appendJSONValue appends val as log/slog's JSONHandler does, but for the
// two choices in the package comment.
func appendJSONValue(b []byte, val any) []byte {
	if b, ok := appendNumber(b, val); ok {
		return b
	}
	switch v := val.(type) {
	case string:
		return appendJSONString(b, v)
	case time.Duration:
		return appendJSONString(b, v.String())
	case time.Time:
		return jsonenc.AppendTime(b, v)
	case json.Marshaler:
		doc, err := v.MarshalJSON()
		if err != nil || !json.Valid(doc) {
			return appendJSONString(b, "!ERROR: json.Marshaler")
		}
		return append(b, doc...)
	case error:
		return appendJSONString(b, v.Error())
	case encoding.TextMarshaler:
		text, err := v.MarshalText()
		if err != nil {
			return appendJSONString(b, "!ERROR:"+err.Error())
		}
		return appendJSONString(b, string(text))
	case []byte:
		return append(base64.StdEncoding.AppendEncode(append(b, '"'), v), '"') // as encoding/json
	}
	if val != nil {
		// A named type of a basic kind (lease.Reason, a signal number)
		// is what encoding/json would write for its kind.
		switch rv := reflect.ValueOf(val); rv.Kind() {
		case reflect.String:
			return appendJSONString(b, rv.String())
		case reflect.Bool:
			return strconv.AppendBool(b, rv.Bool())
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return strconv.AppendInt(b, rv.Int(), 10)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			return strconv.AppendUint(b, rv.Uint(), 10)
		}
	} else {
		return append(b, "null"...)
	}
	return appendJSONString(b, fmt.Sprintf("%+v", val))
}

// appendNumber appends the Go types log/slog writes as numbers and bools
// in both formats (slog.AnyValue's kinds); ok is false for other types.
func appendNumber(b []byte, val any) ([]byte, bool) {
	switch v := val.(type) {
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int8:
		return strconv.AppendInt(b, int64(v), 10), true
	case int16:
		return strconv.AppendInt(b, int64(v), 10), true
	case int32:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case uint:
		return strconv.AppendUint(b, uint64(v), 10), true
	case uint8:
		return strconv.AppendUint(b, uint64(v), 10), true
	case uint16:
		return strconv.AppendUint(b, uint64(v), 10), true
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), true
	case uint64:
		return strconv.AppendUint(b, v, 10), true
	case uintptr:
		return strconv.AppendUint(b, uint64(v), 10), true
	case bool:
		return strconv.AppendBool(b, v), true
	case float64:
		return strconv.AppendFloat(b, v, 'g', -1, 64), true
	case float32:
		return strconv.AppendFloat(b, float64(v), 'g', -1, 64), true
	}
	return b, false
}

// appendJSONString appends s as log/slog's JSON handler does.
func appendJSONString(b []byte, s string) []byte { return jsonenc.AppendLogString(b, s) }

// appendTextString appends s as log/slog's TextHandler does: as it is, or
// Go-quoted when it is empty or holds a space, '=', '"', a control
// character, a non-printing or space rune, or invalid UTF-8.
func appendTextString(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

// needsQuoting is appendTextString's test.
func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == ' ' || c == '=' || c == '"' {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

// appendRFC3339Millis appends t as log/slog's TextHandler does: RFC 3339
// with exactly three fractional digits, truncated.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	return t.Truncate(time.Millisecond).AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
}
