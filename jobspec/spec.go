package jobspec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/warmpod/warmpod/internal/jsondec"
)

// Limits applied by [ParseSpec]. They are warmpod's own choices, sized so a
// hostile or broken executor cannot make PID 1 allocate without bound.
const (
	// MaxSpecBytes is the largest job spec accepted, in bytes: the whole
	// JSON line (1 MiB).
	MaxSpecBytes = 1 << 20

	// MaxVariables is the largest number of entries in "variables".
	MaxVariables = 1000

	// MaxValueBytes is the largest decoded variable value, and the largest
	// decoded token, in bytes (256 KiB).
	MaxValueBytes = 256 << 10
	// MaxEnvString is the longest "KEY=VALUE" string (with its NUL) that
	// execve(2) accepts in an environment (MAX_ARG_STRLEN, 32 pages of
	// 4 KiB): a non-file variable, and the token with its variable name,
	// must fit in it.
	MaxEnvString = 128 << 10

	// MaxKeyBytes is the longest variable key, in bytes.
	MaxKeyBytes = 256

	// MaxIDBytes is the longest "id", "nonce", "scope" and "config_hash",
	// in bytes (after JSON decoding).
	MaxIDBytes = 256

	// DefaultTimeout is the job timeout used when the spec has no
	// "timeout".
	DefaultTimeout = time.Hour

	// MaxTimeout is the longest "timeout" accepted (7 days).
	MaxTimeout = 7 * 24 * time.Hour

	// MaxCleanupPaths is the largest number of entries in
	// "cleanup_paths".
	MaxCleanupPaths = 64
	// MaxPathBytes is the longest cleanup path pattern, in bytes
	// (PATH_MAX, limits.h).
	MaxPathBytes = 4096
)

// Variable is one CI variable of the job.
type Variable struct {
	// Key is the environment variable name: a POSIX name (IEEE Std
	// 1003.1, Base Definitions, 3.235 Name), at most MaxKeyBytes bytes.
	Key string
	// Value is the variable's value, at most MaxValueBytes bytes, without
	// NUL bytes.
	Value Secret
	// Masked is the executor's request to mask the value in job logs.
	// This package only carries it; masking is up to the caller.
	Masked bool
	// File means the value is written to a file (see [Spec.WriteFiles])
	// and the environment variable then holds the file's path.
	File bool
}

// Spec is a parsed and validated job spec. Build one with [ParseSpec] and
// release its secrets with [Spec.Wipe] when the job ends.
type Spec struct {
	// ID identifies the job. It is used as a directory name, so it holds
	// only A-Z a-z 0-9 . _ - and does not start with "." or contain "..".
	ID string
	// Nonce, ConfigHash and Scope are opaque to this package: at most
	// MaxIDBytes bytes, no control characters, empty when absent.
	Nonce, ConfigHash, Scope string
	// Token is the job token (may be empty).
	Token Secret
	// Timeout is the job's time limit; DefaultTimeout when the spec has
	// none. 0 < Timeout <= MaxTimeout.
	Timeout time.Duration
	// LeaseTTL is the heartbeat lease; 0 means no heartbeat.
	// LeaseTTL <= Timeout.
	LeaseTTL time.Duration
	// Variables are the job's variables in spec order; keys are unique.
	Variables []Variable
	// CleanupPaths are absolute directory patterns ([filepath.Match]
	// syntax) whose contents PID 1 removes when the job ends, whatever
	// ends it: the places where an executor's own scripts leave copies of
	// the token (GitLab Runner's attach strategy writes
	// /scripts-<project>-<job>/ with "export CI_JOB_TOKEN=..."). Each
	// passes [CheckCleanupPath].
	CleanupPaths []string
}

// SpecError reports why a job spec was rejected. Field names the offending
// field as a path ("id", "variables[3].key"), or is empty when the error is
// about the document as a whole (size, JSON syntax, not an object). Reason
// is a fixed description; neither ever contains a value or the token.
type SpecError struct {
	Field  string
	Reason string
}

// Error returns "job spec: <field>: <reason>", or "job spec: <reason>" when
// Field is empty.
func (e *SpecError) Error() string {
	if e.Field == "" {
		return "job spec: " + e.Reason
	}
	return "job spec: " + e.Field + ": " + e.Reason
}

// ParseSpec parses and validates one JSON job spec (one line piped into
// `warmpod job start`; a trailing newline or other whitespace is fine).
//
// The rules, each reported as a *SpecError naming the field:
//   - the input is at most MaxSpecBytes and is exactly one JSON object
//     (RFC 8259); member names are matched exactly (case-sensitive), an
//     unknown or repeated member is an error; null counts as absent;
//   - "id" is required, 1..MaxIDBytes bytes of A-Z a-z 0-9 . _ -, not
//     starting with "." and without ".." (it names a directory);
//   - "nonce", "scope", "config_hash" are optional strings of at most
//     MaxIDBytes bytes without control characters (unicode.IsControl);
//   - "token" is an optional string (may be empty) of at most
//     MaxValueBytes bytes without NUL;
//   - "timeout" and "lease_ttl" are strings in time.ParseDuration syntax,
//     greater than zero; timeout <= MaxTimeout (default DefaultTimeout),
//     lease_ttl <= timeout;
//   - "variables" is an array of at most MaxVariables objects with members
//     "key" (required, a POSIX name [A-Za-z_][A-Za-z0-9_]* per IEEE Std
//     1003.1 3.235, at most MaxKeyBytes, unique), "value" (optional string
//     of at most MaxValueBytes bytes without NUL, because an environment
//     string cannot hold one, execve(2)), "masked" and "file" (optional
//     booleans).
//
// The token and the values are decoded straight into []byte owned by the
// returned Spec (see [Secret.UnmarshalJSON]); they do not alias data. On
// error everything decoded so far is wiped and the Spec is nil. ParseSpec
// does not modify data; the caller should clear it once done.
func ParseSpec(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, &SpecError{Reason: fmt.Sprintf("longer than MaxSpecBytes (%d bytes)", MaxSpecBytes)}
	}
	if !json.Valid(data) {
		return nil, syntaxError(data)
	}
	start := skipSpace(data, 0)
	if data[start] != '{' {
		return nil, &SpecError{Reason: "not a JSON object"}
	}
	s := &Spec{Timeout: DefaultTimeout}
	if err := s.decode(data[start:]); err != nil {
		s.Wipe()
		return nil, err
	}
	return s, nil
}

// syntaxError describes invalid JSON by byte offset only: the messages of
// encoding/json quote input characters, which could be part of a secret.
func syntaxError(data []byte) *SpecError {
	// json.Indent's scanner reports the offset json.Unmarshal would, and
	// does not link encoding/json's decoder (PID 1's size, issue 30). It
	// copies data up to the error into buf, which may hold secrets: wiped.
	// Indent grows buf to twice data's length first, more than it writes
	// with no prefix or indent, so no copy is left in a dropped array.
	var buf bytes.Buffer
	err := json.Indent(&buf, data, "", "")
	b := buf.Bytes()
	clear(b[:cap(b)])
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &SpecError{Reason: fmt.Sprintf("not valid JSON (error at byte offset %d)", se.Offset)}
	}
	return &SpecError{Reason: "not valid JSON"}
}

// decode fills s from the JSON object obj, which json.Valid accepted.
func (s *Spec) decode(obj []byte) *SpecError {
	var hasID, hasTimeout, hasLease bool
	seen := make(map[string]bool, 8)
	err := eachMember(obj, &SpecError{Reason: "not valid JSON"}, func(key string, val []byte) *SpecError {
		if seen[key] {
			return &SpecError{Field: memberName("", key), Reason: "repeated field"}
		}
		seen[key] = true
		var err *SpecError
		switch key {
		case "id":
			if !isNull(val) {
				hasID = true
				s.ID, err = stringField(key, val)
			}
		case "nonce":
			s.Nonce, err = textField(key, val)
		case "config_hash":
			s.ConfigHash, err = textField(key, val)
		case "scope":
			s.Scope, err = textField(key, val)
		case "token":
			err = secretField(key, val, &s.Token)
			if err == nil && s.Token.Len()+MaxKeyBytes+2 > MaxEnvString {
				err = &SpecError{Field: "token", Reason: fmt.Sprintf("longer than an environment string may be (%d bytes with its name, MAX_ARG_STRLEN, execve(2))", MaxEnvString)}
			}
		case "timeout":
			if !isNull(val) {
				hasTimeout = true
				s.Timeout, err = durationField(key, val)
			}
		case "lease_ttl":
			if !isNull(val) {
				hasLease = true
				s.LeaseTTL, err = durationField(key, val)
			}
		case "variables":
			err = s.decodeVariables(val)
		case "cleanup_paths":
			s.CleanupPaths, err = cleanupPathsField(key, val)
		default:
			err = &SpecError{Field: memberName("", key), Reason: "unknown field"}
		}
		return err
	})
	if err != nil {
		return err
	}
	if !hasID {
		return &SpecError{Field: "id", Reason: "required"}
	}
	if reason := checkID(s.ID); reason != "" {
		return &SpecError{Field: "id", Reason: reason}
	}
	if hasTimeout && s.Timeout > MaxTimeout {
		return &SpecError{Field: "timeout", Reason: "longer than MaxTimeout (" + MaxTimeout.String() + ")"}
	}
	if hasLease && s.LeaseTTL > s.Timeout {
		return &SpecError{Field: "lease_ttl", Reason: "longer than the timeout"}
	}
	return nil
}

// decodeVariables fills s.Variables from the JSON value arr. Each Variable
// is appended before its value is decoded, so [Spec.Wipe] reaches every
// decoded value whatever fails later.
func (s *Spec) decodeVariables(arr []byte) *SpecError {
	if isNull(arr) {
		return nil
	}
	if arr[0] != '[' {
		return &SpecError{Field: "variables", Reason: "not a JSON array"}
	}
	keys := make(map[string]int)
	return eachElement(arr, &SpecError{Field: "variables", Reason: "not valid JSON"}, func(i int, elem []byte) *SpecError {
		if i >= MaxVariables {
			return &SpecError{Field: "variables", Reason: fmt.Sprintf("more than MaxVariables (%d) entries", MaxVariables)}
		}
		prefix := "variables[" + strconv.Itoa(i) + "]"
		if elem[0] != '{' {
			return &SpecError{Field: prefix, Reason: "not a JSON object"}
		}
		s.Variables = append(s.Variables, Variable{})
		v := &s.Variables[len(s.Variables)-1]
		hasKey := false
		seen := make(map[string]bool, 4)
		err := eachMember(elem, &SpecError{Field: prefix, Reason: "not valid JSON"}, func(key string, val []byte) *SpecError {
			field := memberName(prefix, key)
			if seen[key] {
				return &SpecError{Field: field, Reason: "repeated field"}
			}
			seen[key] = true
			var err *SpecError
			switch key {
			case "key":
				if !isNull(val) {
					hasKey = true
					v.Key, err = stringField(field, val)
				}
			case "value":
				err = secretField(field, val, &v.Value)
			case "masked":
				v.Masked, err = boolField(field, val)
			case "file":
				v.File, err = boolField(field, val)
			default:
				err = &SpecError{Field: field, Reason: "unknown field"}
			}
			return err
		})
		if err != nil {
			return err
		}
		field := prefix + ".key"
		switch {
		case !hasKey:
			return &SpecError{Field: field, Reason: "required"}
		case len(v.Key) > MaxKeyBytes:
			return &SpecError{Field: field, Reason: fmt.Sprintf("longer than MaxKeyBytes (%d bytes)", MaxKeyBytes)}
		case !isName(v.Key):
			return &SpecError{Field: field, Reason: "not a POSIX name ([A-Za-z_][A-Za-z0-9_]*, IEEE Std 1003.1 3.235)"}
		}
		if j, dup := keys[v.Key]; dup {
			return &SpecError{Field: field, Reason: "same key as variables[" + strconv.Itoa(j) + "]"}
		}
		if !v.File && len(v.Key)+1+v.Value.Len()+1 > MaxEnvString {
			return &SpecError{Field: prefix + ".value", Reason: fmt.Sprintf("KEY=VALUE longer than one environment string may be (%d bytes, MAX_ARG_STRLEN, execve(2)); use a file variable", MaxEnvString)}
		}
		keys[v.Key] = i
		return nil
	})
}

// memberName returns the field path for the object member key under
// prefix. A key that is not a plain identifier is quoted and truncated, so
// that the error message stays one short, printable line.
func memberName(prefix, key string) string {
	plain := key != "" && len(key) <= 64
	for i := 0; plain && i < len(key); i++ {
		c := key[i]
		plain = c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	if !plain {
		if len(key) > 64 {
			cut := 64
			for cut > 0 && !utf8.RuneStart(key[cut]) {
				cut--
			}
			key = key[:cut] + "..."
		}
		key = strconv.Quote(key)
	}
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

// stringField decodes the JSON string val. The error never shows val.
func stringField(field string, val []byte) (string, *SpecError) {
	var s string
	if val[0] != '"' || jsondec.Value(val, &s) != nil {
		return "", &SpecError{Field: field, Reason: "not a JSON string"}
	}
	return s, nil
}

// textField decodes an optional short text member (nonce, scope,
// config_hash): at most MaxIDBytes bytes, no control characters.
func textField(field string, val []byte) (string, *SpecError) {
	if isNull(val) {
		return "", nil
	}
	s, err := stringField(field, val)
	if err != nil {
		return "", err
	}
	if len(s) > MaxIDBytes {
		return "", &SpecError{Field: field, Reason: fmt.Sprintf("longer than MaxIDBytes (%d bytes)", MaxIDBytes)}
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "", &SpecError{Field: field, Reason: "contains a control character"}
	}
	return s, nil
}

// boolField decodes an optional JSON boolean.
func boolField(field string, val []byte) (bool, *SpecError) {
	switch string(val) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, &SpecError{Field: field, Reason: "not a JSON boolean"}
}

// durationField decodes a JSON string in time.ParseDuration syntax that
// must be greater than zero.
func durationField(field string, val []byte) (time.Duration, *SpecError) {
	s, err := stringField(field, val)
	if err != nil {
		return 0, &SpecError{Field: field, Reason: "not a JSON string holding a Go duration (time.ParseDuration), e.g. \"90s\""}
	}
	d, perr := time.ParseDuration(s)
	if perr != nil {
		// perr quotes the input; it is not a secret but keep the
		// message fixed anyway.
		return 0, &SpecError{Field: field, Reason: "not a Go duration (time.ParseDuration), e.g. \"90s\" or \"1h\""}
	}
	if d <= 0 {
		return 0, &SpecError{Field: field, Reason: "not greater than zero"}
	}
	return d, nil
}

// secretField decodes the JSON string val into dst (straight into a
// []byte, see Secret.UnmarshalJSON) and checks it against MaxValueBytes and
// for NUL. On error dst may hold the value; the caller wipes the Spec.
func secretField(field string, val []byte, dst *Secret) *SpecError {
	if isNull(val) {
		return nil
	}
	if val[0] != '"' || dst.UnmarshalJSON(val) != nil {
		return &SpecError{Field: field, Reason: "not a JSON string"}
	}
	if dst.Len() > MaxValueBytes {
		return &SpecError{Field: field, Reason: fmt.Sprintf("longer than MaxValueBytes (%d bytes)", MaxValueBytes)}
	}
	if bytes.IndexByte(dst.b, 0) >= 0 {
		return &SpecError{Field: field, Reason: "contains a NUL byte, which an environment string cannot hold (execve(2))"}
	}
	return nil
}

// checkID returns why id is not a valid job ID, or "".
func checkID(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > MaxIDBytes:
		return fmt.Sprintf("longer than MaxIDBytes (%d bytes)", MaxIDBytes)
	case id[0] == '.':
		return `starts with "."`
	case strings.Contains(id, ".."):
		return `contains ".."`
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c == '.' || c == '_' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return "has a character other than A-Z a-z 0-9 . _ -"
		}
	}
	return ""
}

// isName reports whether s is a POSIX name: [A-Za-z_][A-Za-z0-9_]*
// (IEEE Std 1003.1, Base Definitions, 3.235 Name).
func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// Wipe zeroes the token and every variable value ([Secret.Wipe]) and
// clears Variables (nil afterwards). The other fields are kept. It is safe
// on a nil *Spec and can be called more than once.
func (s *Spec) Wipe() {
	if s == nil {
		return
	}
	s.Token.Wipe()
	for i := range s.Variables {
		s.Variables[i].Value.Wipe()
	}
	clear(s.Variables)
	s.Variables = nil
}

// Env returns the job's environment entries as "KEY=VALUE" strings, ready
// for exec.Cmd.Env or [RenderExports]: first each variable in spec order (a
// File variable yields KEY=<fileDir>/<KEY>, the path [Spec.WriteFiles]
// wrote when given fileDir), then tokenEnv=<token> if tokenEnv is not "".
// The token wins over a variable with the same key: that variable is left
// out. fileDir should be absolute; it is joined with filepath.Join.
//
// The returned strings hold clear secrets that [Spec.Wipe] cannot reach;
// drop them as soon as the environment is built.
func (s *Spec) Env(tokenEnv, fileDir string) []string {
	env := make([]string, 0, len(s.Variables)+1)
	for _, v := range s.Variables {
		if tokenEnv != "" && v.Key == tokenEnv {
			continue
		}
		if v.File {
			env = append(env, v.Key+"="+filepath.Join(fileDir, v.Key))
		} else {
			env = append(env, v.Key+"="+string(v.Value.b))
		}
	}
	if tokenEnv != "" {
		env = append(env, tokenEnv+"="+string(s.Token.b))
	}
	return env
}

// cleanupPathsField decodes "cleanup_paths": an array of path patterns.
// The error names the entry, never its value.
func cleanupPathsField(field string, val []byte) ([]string, *SpecError) {
	if isNull(val) {
		return nil, nil
	}
	if val[0] != '[' {
		return nil, &SpecError{Field: field, Reason: "not a JSON array"}
	}
	var out []string
	err := eachElement(val, &SpecError{Field: field, Reason: "not valid JSON"}, func(i int, elem []byte) *SpecError {
		name := field + "[" + strconv.Itoa(i) + "]"
		if i >= MaxCleanupPaths {
			return &SpecError{Field: field, Reason: fmt.Sprintf("more than MaxCleanupPaths (%d) entries", MaxCleanupPaths)}
		}
		p, err := stringField(name, elem)
		if err != nil {
			return err
		}
		if reason := CheckCleanupPath(p); reason != "" {
			return &SpecError{Field: name, Reason: reason}
		}
		out = append(out, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CheckCleanupPath tells why p cannot name directories whose contents PID 1
// removes at job end, or "" when it can: p must be an absolute, clean path
// (filepath.Clean leaves it unchanged) of at most MaxPathBytes bytes
// without control characters, a valid [filepath.Match] pattern, and not "/"
// nor anything under /proc, /sys or /dev (kernel file systems: removing
// there is never a clean-up). The rules are syntactic; at clean-up time
// each match is opened without following symlinks, so a job cannot point a
// matching name elsewhere.
func CheckCleanupPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > MaxPathBytes:
		return fmt.Sprintf("longer than MaxPathBytes (%d bytes)", MaxPathBytes)
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return "contains a control character"
	case !filepath.IsAbs(p):
		return "not an absolute path"
	case filepath.Clean(p) != p:
		return "not a clean path (no //, /./, /../ or trailing /)"
	case p == "/":
		return "the root directory"
	}
	if _, err := filepath.Match(p, ""); err != nil {
		return "not a valid pattern (filepath.Match)"
	}
	for _, bad := range []string{"/proc", "/sys", "/dev"} {
		if p == bad || strings.HasPrefix(p, bad+"/") {
			return "under " + bad
		}
	}
	// A pattern whose first element is a wildcard ("/scripts-*" is fine)
	// must not match /proc, /sys or /dev themselves.
	first, _, _ := strings.Cut(p[1:], "/")
	for _, kernel := range []string{"proc", "sys", "dev"} {
		if ok, _ := filepath.Match(first, kernel); ok {
			return "first path element matches /" + kernel
		}
	}
	return ""
}
