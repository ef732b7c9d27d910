package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Parse parses args into fs, then the prefix* environment twins of the
// flags args did not set (Apply). A bad flag or twin is one line that names it
// and says what it wants ("--idle-timeout: \"5x\" is not a Go duration,
// e.g. 90s"), never the flag package's "parse error" followed by every
// flag's usage: that is for -h, which returns flag.ErrHelp with nothing
// printed. fs's own output and usage are left as they were.
func Parse(fs *flag.FlagSet, args []string, prefix, command string) error {
	if err := ParseArgs(fs, args, command); err != nil {
		return err
	}
	return ApplyExplained(fs, prefix)
}

// ApplyExplained sets the flags of fs that the command line did not from
// their prefix* twins (Apply). Its error names the variable and its value, then what
// the flag wants (explained.Set's error).
func ApplyExplained(fs *flag.FlagSet, prefix string) error {
	err, _ := explain(fs, func() error { return Apply(fs, prefix) })
	return err
}

// ParseArgs is Parse without the environment: fs.Parse, its errors said
// as Parse says them. command is how the user runs fs's command
// ("warmpod job start"), for the hint of a flag fs does not know.
func ParseArgs(fs *flag.FlagSet, args []string, command string) error {
	out, usage := fs.Output(), fs.Usage
	var msg strings.Builder
	fs.SetOutput(&msg)
	fs.Usage = func() {}
	err, bad := explain(fs, func() error { return fs.Parse(args) })
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return err
	case bad != nil:
		return bad
	}
	// The flag package's own line: "flag provided but not defined: -x",
	// "flag needs an argument: -x", "bad flag syntax: ---x".
	line, _, _ := strings.Cut(msg.String(), "\n")
	return fmt.Errorf("%s (%s -h lists its flags)", line, command)
}

// explain runs parse with every flag's value wrapped (explained) and
// returns its error and, when a value was refused, the first one as
// explained says it ("--NAME: ...").
func explain(fs *flag.FlagSet, parse func() error) (err, bad error) {
	orig := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		orig[f] = f.Value
		f.Value = &explained{Value: f.Value, name: f.Name, bad: &bad}
	})
	err = parse()
	fs.VisitAll(func(f *flag.Flag) { f.Value = orig[f] })
	return err, bad
}

// explained is a flag's value while Parse parses: a value it
// refuses is said by what the flag wants, from the type of the value
// (flag.Getter, which the flag package's own values implement), and kept
// in bad with the flag's name.
type explained struct {
	flag.Value
	name string
	bad  *error
}

// IsBoolFlag passes on whether the flag takes no value (--follow).
func (e *explained) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Set sets the value; its error says what the flag wants (flagenv.Apply
// names the variable and the value before it).
func (e *explained) Set(s string) error {
	err := e.Value.Set(s)
	if err == nil {
		return nil
	}
	if want := wants(e.Value, s); want != "" {
		err = errors.New(want)
		if *e.bad == nil {
			*e.bad = fmt.Errorf("--%s: %q is %s", e.name, s, want)
		}
	} else if *e.bad == nil {
		*e.bad = fmt.Errorf("--%s: %w", e.name, err)
	}
	return err
}

// wants says what a value of v's type looks like, for s that v refused;
// "" for a value of another type (a path list, a flag.Func), whose own
// error says it.
func wants(v flag.Value, s string) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return ""
	}
	var ne *strconv.NumError
	switch g.Get().(type) {
	case time.Duration:
		return "not a Go duration, e.g. 90s"
	case int, int64:
		if _, e := strconv.ParseInt(s, 0, 64); errors.As(e, &ne) && ne.Err == strconv.ErrRange {
			return "out of range"
		}
		return "not an integer"
	case uint, uint64:
		if _, e := strconv.ParseUint(s, 0, 64); errors.As(e, &ne) && ne.Err == strconv.ErrRange {
			return "out of range"
		}
		return "not a whole number (0 or more)"
	case bool:
		return "not true or false"
	}
	return ""
}
