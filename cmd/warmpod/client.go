package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/jsonenc"
)

const jobUsage = `usage: warmpod job COMMAND [--control-socket PATH] [--job ID] ...
  start                                  claim the pod: one JSON job spec line on stdin
  check                                  check a job spec line on stdin as start would, without PID 1 (65: bad)
  run [--detach --stage NAME] -- cmd...  run in the job's environment (detached: as a stage of PID 1)
  exec -- cmd...                         become cmd, as a direct exec would run it, once --job holds the lease
  stage --stage NAME --size N --sha256 HEX [--offset N] < script
                                         run a script as a stage, stream its output, exit with its code
  logs [--offset N] [--follow]           the job log as "<offset> <line>" (exit 100: log gone)
  status [--stage S] | wait --stage S [--timeout D]
  cancel [--stage S] [--grace D] | put PATH --size N --sha256 HEX [--mode M] | env | end
  attach                                 serve the executor's multiplexer: muxproto frames on stdin/stdout
  limits [--cpu-shares N] [--cpu-weight N]... [--cpu-quota µs] [--memory-limit B] [--within D]
                                         the container's cgroup limits; wait until it holds these
Run "warmpod job COMMAND -h" for a command's flags.`

// specReadTimeout bounds how long `job start` waits for the job spec line
// on stdin.
const specReadTimeout = 10 * time.Second

func clientFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	sock := fs.String("control-socket", defaultSocket, "PID 1's control socket (env WARMPOD_CONTROL_SOCKET)")
	return fs, sock
}

// jobFlags adds --job: the job the call is for; it renews that job's lease
// (the heartbeat of a spec with lease_ttl) and is refused when another job
// holds the lease.
func jobFlags(name string) (*flag.FlagSet, *string, *string) {
	fs, sock := clientFlags(name)
	job := fs.String("job", "", "job id: the call renews that job's lease")
	return fs, sock, job
}

// parseClient parses flags up to the first positional argument, which
// stays in fs.Args() with everything after it (probe live, job run cmd
// args); see parseClientArgs for commands whose flags may follow their
// positional argument.
func parseClient(fs *flag.FlagSet, args []string) bool {
	return parseClientTo(fs, args, os.Stderr)
}

// parseClientTo is parseClient saying a bad flag or environment twin on
// stderr, in one line (a call that `job attach` runs in its own process
// has its own stderr); -h prints the command's flags.
func parseClientTo(fs *flag.FlagSet, args []string, stderr io.Writer) bool {
	return clientParsed(fs, parseFlags(fs, args), stderr)
}

// clientParsed says a client's flag error err on stderr, or its flags
// after -h, and tells whether there was none.
func clientParsed(fs *flag.FlagSet, err error, stderr io.Writer) bool {
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stderr)
		fs.Usage()
		return false
	case err != nil:
		fmt.Fprintf(stderr, "warmpod: %s: %v\n", fs.Name(), err)
		return false
	}
	return true
}

// parseClientArgs parses flags and positional arguments in any order
// ("put --job a PATH --size N" and "put PATH --job a --size N" alike; Go's
// flag package alone stops at the first positional) and returns the
// positional ones; everything after "--" is positional.
func parseClientArgs(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if err := parseArgs(fs, args); err != nil {
			return nil, clientParsed(fs, err, os.Stderr)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	return pos, clientParsed(fs, applyEnv(fs), os.Stderr)
}

// callTimeout bounds any client's exchange with PID 1 (a job end takes up
// to --grace plus the kill and reap).
const callTimeout = 10 * time.Minute

// client is a client command's connection to PID 1: the contract's typed
// client, every exchange bounded by callTimeout.
type client struct{ control.Client }

func newClient(sock string) client {
	return client{control.Client{Socket: sock, Timeout: callTimeout}}
}

// answer passes on PID 1's answer and its exit code; an unreachable
// socket is exit 69, said on stderr.
func (c client) answer(resp *control.Response, err error) (*control.Response, int) {
	if err != nil {
		return nil, unreachable(os.Stderr, c.Socket, err)
	}
	return resp, resp.Code
}

// unreachable says on stderr that PID 1 is not reachable at sock, and
// returns the exit code for it.
func unreachable(stderr io.Writer, sock string, err error) int {
	fmt.Fprintf(stderr, "warmpod: PID 1 not reachable at %s: %v\n", sock, err)
	return control.ExitUnavailable
}

// printJSON prints v's JSON (jsonenc: PID 1's binary links no
// reflection-based encoder) as one line on stdout.
func printJSON(v jsonenc.Appender) {
	_, _ = os.Stdout.Write(append(v.AppendJSON(nil), '\n'))
}

// result prints the one-line JSON answer of a state-changing command on
// stdout (the executor's machine channel) and the error on stderr.
// Its members are in name order: it was once an encoding/json map.
func result(resp *control.Response) int {
	o := jsonenc.NewObject(nil)
	if resp.Error != "" {
		o.Int("code", int64(resp.Code))
		o.String("error", resp.Error)
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
	}
	o.OmitEmpty("job", resp.Job)
	o.Bool("ok", resp.OK)
	o.OmitEmpty("refusal", string(resp.Refusal))
	if resp.Replay {
		o.Bool("replay", true)
	}
	o.OmitEmpty("state", resp.State)
	_, _ = os.Stdout.Write(append(o.End(), '\n'))
	return resp.Code
}

func jobCmd(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, jobUsage)
		return control.ExitUsage
	}
	switch args[0] {
	case "start":
		return jobStart(args[1:])
	case "check":
		return jobCheck(args[1:])
	case "run":
		return jobRun(args[1:])
	case "exec":
		return jobExec(args[1:])
	case "stage":
		return jobStage(args[1:])
	case "env":
		return jobEnv(args[1:])
	case "end":
		return jobEnd(args[1:])
	case "put":
		return jobPut(args[1:])
	case "logs":
		return jobLogs(args[1:])
	case "status":
		return jobStatus(args[1:])
	case "wait":
		return jobWait(args[1:])
	case "cancel":
		return jobCancel(args[1:])
	case "attach":
		return jobAttach(args[1:])
	case "limits":
		return jobLimits(args[1:])
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Println(jobUsage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "warmpod: unknown job command %q\n%s\n", args[0], jobUsage)
	return control.ExitUsage
}

// errNoReader ends a follower whose output nobody reads any more.
var errNoReader = errors.New("nobody reads the output any more (the exec client is gone): stopped, and the lease no longer renewed")
