// Command warmpod is the PID 1 of a warm CI pod: an init that proxies the
// container's stdio to a shell, reaps zombies, forwards signals, hands jobs
// over through a local control socket, serves kubelet probes, and drains
// after an idle deadline. See README.md.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/warmpod/warmpod/control"
	// PID 1 runs with GOMAXPROCS=1 unless the environment sets it; see
	// the package for why and why it is set from an initialiser.
	_ "github.com/warmpod/warmpod/internal/oneproc"
	"github.com/warmpod/warmpod/shellproxy"
)

// version is stamped at build time with -ldflags "-X main.version=...".
var version = "dev"

const defaultSocket = "/run/warmpod/control.sock"

// init keeps the main goroutine on the main thread for the whole run
// (runtime.main holds that lock during initialisation; locking here
// keeps it). PID 1 takes signals on that thread (package sigwait): the
// kernel offers a process-directed signal to the main thread first.
func init() { runtime.LockOSThread() }

func main() {
	os.Exit(run(os.Args[1:]))
}

// run decides by the first word that is not one of PID 1's flags: a
// subcommand runs it; no word, a word after "--", or a program (a path
// that exists, a name found in PATH) starts PID 1 with that command as
// its shell; anything else is a usage error (2) naming the word, so a
// mistyped subcommand never starts a PID 1. Flags before a subcommand
// are PID 1's flag set; only --control-socket means something to a client
// command, and is handed to it.
func run(args []string) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		return versionCmd(nil)
	}
	pf := newPID1Flags()
	switch err := parseArgs(pf.fs, args); {
	case errors.Is(err, flag.ErrHelp):
		usage(os.Stdout, pf.fs)
		return 0
	case err != nil:
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return control.ExitUsage
	}
	rest := pf.fs.Args()
	if n := len(args) - len(rest); len(rest) == 0 || n > 0 && args[n-1] == "--" {
		return pid1(pf)
	}
	word := rest[0]
	if cmd := subcommand(word); cmd != nil {
		cargs, err := clientArgs(pf.fs, word, rest[1:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmpod:", err)
			return control.ExitUsage
		}
		return cmd(cargs)
	}
	if err := isProgram(word); err != nil {
		fmt.Fprintf(os.Stderr, "warmpod: %v (warmpod help lists the commands; warmpod -- CMD runs a program as PID 1's shell)\n", err)
		return control.ExitUsage
	}
	return pid1(pf)
}

// subcommand is the function of a subcommand word, nil for another word
// (suggest has the same list).
func subcommand(word string) func([]string) int {
	switch word {
	case "job":
		return jobCmd
	case "probe":
		return probeCmd
	case "status":
		return statusCmd
	case "debug":
		return debugCmd
	case "install":
		return installCmd
	case "version":
		return versionCmd
	case "help":
		return helpCmd
	}
	return nil
}

// clientArgs are the arguments of subcommand word: args, with the
// --control-socket given before the word (`warmpod --control-socket S
// status`) in front of its own flags when it talks to PID 1. Any other of
// PID 1's flags before a subcommand is an error.
func clientArgs(fs *flag.FlagSet, word string, args []string) ([]string, error) {
	var err error
	var sock *flag.Flag
	fs.Visit(func(f *flag.Flag) {
		switch {
		case f.Name == "control-socket":
			sock = f
		case err == nil:
			err = fmt.Errorf("--%s is a flag of PID 1, not of warmpod %s (warmpod %s -h lists its flags)", f.Name, word, word)
		}
	})
	if err != nil || sock == nil {
		return args, err
	}
	sockFlag := []string{"--control-socket", sock.Value.String()}
	switch {
	case word == "probe" || word == "status" || word == "debug":
		return append(sockFlag, args...), nil
	case word == "job" && len(args) > 0 && args[0] != "limits" && args[0] != "check" && !strings.HasPrefix(args[0], "-"):
		return append(append([]string{args[0]}, sockFlag...), args[1:]...), nil
	}
	return args, nil // install, version, help, job limits, job check: no PID 1 to reach
}

// isProgram tells whether word names a program PID 1 can run as its shell
// (a path to an executable file, or a name found in PATH) and, when not,
// why, with the subcommand it may be a typo of.
func isProgram(word string) error {
	if strings.Contains(word, "/") {
		st, err := os.Stat(word)
		switch {
		case err != nil:
			return fmt.Errorf("%q: no such program", word)
		case st.IsDir() || st.Mode()&0o111 == 0:
			return fmt.Errorf("%q: not an executable file", word)
		}
		return nil
	}
	if _, err := shellproxy.LookPath(word, os.Environ()); err == nil {
		return nil
	}
	if s := suggest(word); s != "" {
		return fmt.Errorf("unknown command %q: did you mean %q?", word, s)
	}
	return fmt.Errorf("unknown command %q: neither a warmpod command nor a program in PATH", word)
}

// suggest returns the subcommand word is most likely a typo of (at most
// two edits away: "stauts", "jobs"), or "".
func suggest(word string) string {
	best, bestD := "", 3
	for _, c := range [...]string{"job", "probe", "status", "debug", "install", "version", "help"} {
		if d := editDistance(word, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b
// in bytes (Levenshtein's, with a swap of two neighbours, "stauts", as one
// edit), capped at 3: a word that far from every command suggests none.
func editDistance(a, b string) int {
	if len(a) > len(b)+2 || len(b) > len(a)+2 || len(a) > 16 {
		return 3
	}
	var d [17][17]int
	for i := 0; i <= len(a); i++ {
		for j := 0; j <= len(b); j++ {
			switch {
			case i == 0 || j == 0:
				d[i][j] = i + j
			default:
				cost := 1
				if a[i-1] == b[j-1] {
					cost = 0
				}
				d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
				if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
					d[i][j] = min(d[i][j], d[i-2][j-2]+1)
				}
			}
		}
	}
	return min(d[len(a)][len(b)], 3)
}

const mainUsage = `usage: warmpod [flags] [[--] command args...]   PID 1, running command as its shell (default /bin/sh)
       warmpod [--control-socket PATH] job COMMAND ...   a job's calls to PID 1 (warmpod job -h)
       warmpod [--control-socket PATH] probe live|ready | status | debug stall DURATION
       warmpod install DIR | version | help
A first word that is neither a command nor a program (a path, or a name in PATH)
is refused (exit 2); after "--" it is always PID 1's command.

flags of PID 1 (each also as WARMPOD_<NAME>):
`

// usage prints warmpod's usage and PID 1's flags to w.
func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, mainUsage)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// helpCmd prints the usage (help job: the job commands') on stdout.
func helpCmd(args []string) int {
	if len(args) > 0 && args[0] == "job" {
		fmt.Println(jobUsage)
		return 0
	}
	usage(os.Stdout, newPID1Flags().fs)
	return 0
}

func versionCmd([]string) int {
	fmt.Println("warmpod", version)
	return 0
}
