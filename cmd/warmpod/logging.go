package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/internal/initlog"
)

// newLogger builds PID 1's logger (internal/initlog: log/slog's text or
// JSON lines) on stderr, or on file (appended, 0600, close-on-exec so no
// child inherits it). The returned func closes the file. Errors: an
// unknown level or format, or the file's open error.
func newLogger(level, format, file string) (*initlog.Logger, func(), error) {
	var lvl initlog.Level
	switch strings.ToLower(level) {
	case "trace":
		lvl = initlog.LevelTrace
	case "debug":
		lvl = initlog.LevelDebug
	case "info":
		lvl = initlog.LevelInfo
	case "warn":
		lvl = initlog.LevelWarn
	case "error":
		lvl = initlog.LevelError
	case "off":
		lvl = initlog.LevelOff
	default:
		return nil, nil, fmt.Errorf("log level %q: want trace, debug, info, warn, error or off", level)
	}
	var f initlog.Format
	switch strings.ToLower(format) {
	case "text":
		f = initlog.Text
	case "json":
		f = initlog.JSON
	default:
		return nil, nil, fmt.Errorf("log format %q: want text or json", format)
	}
	var out io.Writer = os.Stderr
	closeFn := func() {}
	if file != "" {
		fh, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, nil, err
		}
		out, closeFn = fh, func() { _ = fh.Close() }
	}
	if lvl == initlog.LevelOff {
		return initlog.Discard(), closeFn, nil
	}
	return initlog.New(out, lvl, f, time.Now), closeFn, nil
}
