package jsondec

// A walker over JSON text json.Valid accepted: it yields sub-slices of the
// input. It still checks bounds, so text that is not valid JSON gives an
// error, never a panic.

import "errors"

// errMalformed is the walker's error for text that is not valid JSON.
var errMalformed = errors.New("jsondec: malformed JSON")

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
// (a '"'), or -1 if it is not terminated.
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
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default:
		// A literal: number, true, false, null.
		for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
			i++
		}
		return i
	}
}

// SkipSpace returns the index of the first byte at or after i of b that is
// not JSON whitespace (len(b) if there is none).
func SkipSpace(b []byte, i int) int { return skipSpace(b, i) }

// Members calls fn with the decoded name and the raw value (a sub-slice of
// obj, without surrounding whitespace) of each member of the JSON object
// obj, in input order, until fn fails. obj may have whitespace around it;
// anything after its closing brace is not looked at. It returns fn's error,
// or an error of its own if obj is not a well-formed object: it never
// panics, whatever obj holds. jobspec walks the job spec with it, so that
// secret values are never copied into buffers it cannot wipe.
func Members(obj []byte, fn func(key string, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errMalformed
	}
	return members(obj[i:], fn)
}

// Elements calls fn with the raw value of each element of the JSON array
// arr, in order, until fn fails; the rest is as for Members.
func Elements(arr []byte, fn func(val []byte) error) error {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errMalformed
	}
	return elements(arr[i:], fn)
}

// members calls fn with the decoded name and the raw value of each member
// of the JSON object obj (obj[0] is its '{'), in input order, until fn
// fails.
func members(obj []byte, fn func(key string, val []byte) error) error {
	i := skipSpace(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return nil
	}
	for {
		if i >= len(obj) || obj[i] != '"' {
			return errMalformed
		}
		end := stringEnd(obj, i)
		if end < 0 {
			return errMalformed
		}
		key, ok := unquote(obj[i:end])
		if !ok {
			return errMalformed
		}
		if i = skipSpace(obj, end); i >= len(obj) || obj[i] != ':' {
			return errMalformed
		}
		i = skipSpace(obj, i+1)
		if end = valueEnd(obj, i); end <= i {
			return errMalformed
		}
		if err := fn(key, obj[i:end]); err != nil {
			return err
		}
		var done bool
		var err error
		if i, done, err = next(obj, end, '}'); done || err != nil {
			return err
		}
	}
}

// elements calls fn with the raw value of each element of the JSON array
// arr (arr[0] is its '['), in order, until fn fails.
func elements(arr []byte, fn func(val []byte) error) error {
	i := skipSpace(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return nil
	}
	for {
		end := valueEnd(arr, i)
		if end <= i {
			return errMalformed
		}
		if err := fn(arr[i:end]); err != nil {
			return err
		}
		var done bool
		var err error
		if i, done, err = next(arr, end, ']'); done || err != nil {
			return err
		}
	}
}

// next steps over the separator after a member or element ending at i:
// the index of the next one, or done at the closing byte.
func next(b []byte, i int, closing byte) (_ int, done bool, _ error) {
	i = skipSpace(b, i)
	switch {
	case i < len(b) && b[i] == closing:
		return 0, true, nil
	case i < len(b) && b[i] == ',':
		return skipSpace(b, i+1), false, nil
	}
	return 0, false, errMalformed
}
