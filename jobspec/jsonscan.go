package jobspec

// A minimal walker over JSON text that encoding/json has already validated
// (json.Valid). It yields sub-slices of the input, so the members of the
// job spec can be decoded one by one, with the field known for every error,
// without encoding/json copying secret values into buffers or strings this
// package cannot wipe. The functions still check bounds so that a caller
// passing unvalidated input gets an error, not a panic.

import "github.com/warmpod/warmpod/internal/jsondec"

// isSpace reports whether c is JSON whitespace (RFC 8259, section 2).
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipSpace returns the index of the first non-whitespace byte at or after
// i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at b[i]
// (which must be '"'), or -1 if the string is not terminated.
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// valueEnd returns the index just past the JSON value starting at b[i], or
// -1 if it is not terminated.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = stringEnd(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		// A literal (number, true, false, null).
		for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i
	}
}

// isNull reports whether the JSON value v is the literal null.
func isNull(v []byte) bool { return string(v) == "null" }

// eachMember calls fn with the key and the raw value of each member of the
// JSON object obj, in input order. It stops at the first error fn returns.
// malformed is returned if obj is not a well-formed object.
func eachMember(obj []byte, malformed *SpecError, fn func(key string, val []byte) *SpecError) *SpecError {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return malformed
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return malformed
		}
		end := stringEnd(obj, i)
		if end < 0 {
			return malformed
		}
		var key string
		if err := jsondec.Value(obj[i:end], &key); err != nil {
			return malformed
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return malformed
		}
		i = skipSpace(obj, i+1)
		end = valueEnd(obj, i)
		if end < 0 {
			return malformed
		}
		if err := fn(key, obj[i:end]); err != nil {
			return err
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return malformed
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return nil
		default:
			return malformed
		}
	}
}

// eachElement calls fn with the index and the raw value of each element of
// the JSON array arr, in order. It stops at the first error fn returns.
// malformed is returned if arr is not a well-formed array.
func eachElement(arr []byte, malformed *SpecError, fn func(i int, val []byte) *SpecError) *SpecError {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return malformed
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for n := 0; ; n++ {
		end := valueEnd(arr, i)
		if end < 0 || end == i {
			return malformed
		}
		if err := fn(n, arr[i:end]); err != nil {
			return err
		}
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return malformed
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			return nil
		default:
			return malformed
		}
	}
}
