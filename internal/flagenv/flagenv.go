// Package flagenv gives command-line flags environment-variable twins:
// every flag not set on the command line takes the value of PREFIX_NAME
// (--idle-timeout ⇐ WARMPOD_IDLE_TIMEOUT), so a Kubernetes manifest or a
// GitLab Runner config.toml can set either.
package flagenv

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// Apply sets every flag of fs that the command line did not set from the
// environment variable prefix + the flag's name in upper case with '-' as
// '_'. It returns the first value a flag refuses, naming the variable.
func Apply(fs *flag.FlagSet, prefix string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}
