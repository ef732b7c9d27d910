package jobspec

import (
	"fmt"
	"io"
	"strings"
)

// Quote returns s as one POSIX sh word in single quotes, per IEEE Std
// 1003.1, Shell Command Language, 2.2.2 Single-Quotes: inside single quotes
// every byte but the single quote itself is literal, so each single quote
// is written as quote, backslash, quote, quote (close the quotes, an
// escaped quote, reopen) and the empty string becomes two single quotes:
//
//	Quote("it's")  // 'it'\''s'
//	Quote("")      // ''
//
// A NUL byte cannot be held by a shell word; callers must not pass one (see
// [RenderExports]). The result is a Go string that cannot be wiped.
func Quote(s string) string {
	return string(appendQuoted(make([]byte, 0, quotedLen(s)), s))
}

// quotedLen is len(Quote(s)).
func quotedLen(s string) int { return len(s) + 2 + 3*strings.Count(s, "'") }

// appendQuoted appends Quote(s) to b.
func appendQuoted(b []byte, s string) []byte {
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

// RenderExports writes one line per "KEY=VALUE" entry of env, in order:
//
//	export KEY='VALUE'
//
// with VALUE quoted by [Quote], so that the output is safe to eval in a
// POSIX sh whatever VALUE holds. Entries without '=' or whose KEY is not a
// POSIX name ([A-Za-z_][A-Za-z0-9_]*, IEEE Std 1003.1 3.235) are skipped.
//
// A VALUE holding a NUL byte cannot be represented in sh: RenderExports
// then returns an error naming the KEY and writes nothing. Otherwise it
// returns the first error from w. Each line is built in a buffer that is
// zeroed after it is written.
func RenderExports(w io.Writer, env []string) error {
	for _, e := range env {
		key, val, ok := strings.Cut(e, "=")
		if ok && isName(key) && strings.IndexByte(val, 0) >= 0 {
			return fmt.Errorf("jobspec: value of %s contains a NUL byte, which sh cannot hold", key)
		}
	}
	var buf []byte
	defer func() { clear(buf[:cap(buf)]) }()
	for _, e := range env {
		key, val, ok := strings.Cut(e, "=")
		if !ok || !isName(key) {
			continue
		}
		n := len("export ") + len(key) + 1 + quotedLen(val) + 1
		if cap(buf) < n {
			clear(buf[:cap(buf)])
			buf = make([]byte, 0, n)
		}
		buf = append(buf[:0], "export "...)
		buf = append(buf, key...)
		buf = append(buf, '=')
		buf = appendQuoted(buf, val)
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
