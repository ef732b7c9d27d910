package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// newLogger builds PID 1's logger: log/slog's text or JSON handler on
// stderr, or on file (appended, 0600, close-on-exec so no child inherits
// it). The returned func closes the file. Errors: an unknown level or
// format, or the file's open error.
func newLogger(level, format, file string) (*slog.Logger, func(), error) {
	var lvl slog.Level
	switch strings.ToLower(level) {
	case "trace":
		lvl = levelTrace
	case "debug":
		lvl = slog.LevelDebug
	case "info":
		lvl = slog.LevelInfo
	case "warn":
		lvl = slog.LevelWarn
	case "error":
		lvl = slog.LevelError
	case "off":
		lvl = levelOff
	default:
		return nil, nil, fmt.Errorf("log level %q: want trace, debug, info, warn, error or off", level)
	}
	format = strings.ToLower(format)
	if format != "text" && format != "json" {
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
	if lvl == levelOff {
		return slog.New(slog.DiscardHandler), closeFn, nil
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		// slog's JSON handler writes a time.Duration as integer
		// nanoseconds; the text handler, the flags and the job spec all
		// write "1m30s", so the JSON log does too.
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(out, opts)), closeFn, nil
	}
	return slog.New(slog.NewTextHandler(out, opts)), closeFn, nil
}
