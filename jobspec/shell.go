package jobspec

import (
	"fmt"
	"io"
	"strings"

	"github.com/warmpod/warmpod/internal/shquote"
)

// RenderExports writes one line per "KEY=VALUE" entry of env, in order:
//
//	export KEY='VALUE'
//
// with VALUE quoted by shquote.Quote, so that the output is safe to eval in a
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
		n := len("export ") + len(key) + 1 + shquote.Len(val) + 1
		if cap(buf) < n {
			clear(buf[:cap(buf)])
			buf = make([]byte, 0, n)
		}
		buf = append(buf[:0], "export "...)
		buf = append(buf, key...)
		buf = append(buf, '=')
		buf = shquote.Append(buf, val)
		buf = append(buf, '\n')
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}
