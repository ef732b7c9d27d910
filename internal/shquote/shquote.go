// Package shquote quotes a string as one POSIX sh word: for PID 1's
// exports (jobspec.RenderExports) and the scripts the GitHub hook writes
// (executor/github). A library of both sides, so neither borrows the
// other's. Standard library only.
package shquote

import "strings"

// Quote returns s as one POSIX sh word in single quotes, per IEEE Std
// 1003.1, Shell Command Language, 2.2.2 Single-Quotes: inside single quotes
// every byte but the single quote itself is literal, so each single quote
// is written as quote, backslash, quote, quote (close the quotes, an
// escaped quote, reopen) and the empty string becomes two single quotes:
//
//	Quote("it's")  // 'it'\''s'
//	Quote("")      // ''
//
// A NUL byte cannot be held by a shell word; callers must not pass one (jobspec.RenderExports
// refuses a value with one). The result is a Go string that cannot be wiped.
func Quote(s string) string {
	return string(Append(make([]byte, 0, Len(s)), s))
}

// Len is len(Quote(s)).
func Len(s string) int { return len(s) + 2 + 3*strings.Count(s, "'") }

// Append appends Quote(s) to b (PID 1 renders exports into a buffer it
// can wipe).
func Append(b []byte, s string) []byte {
	b = append(b, '\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		b = append(b, s[:i]...)
		b = append(b, `'\''`...)
		s = s[i+1:]
	}
	b = append(b, s...)
	return append(b, '\'')
}
