package main

import (
	"context"
	"fmt"
	"os"
	"syscall"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/shellproxy"
)

// jobExec runs cmd in place of itself (execve: the same process, so its
// stdin, stdout, stderr and exit status are cmd's) with this process's
// user and environment, once --job holds the lease (renewed; checked once,
// at the start): what a
// direct exec of cmd into the container does, as a command that the
// job's multiplexer stream carries (muxproto.Carried), so the executor
// needs no exec of its own for it (the GitHub hook's _work unpack). It is
// not `job run`: that one runs cmd as the job's user in the job's
// environment, a step's context. Errors before the exec: 2 usage (--job
// is required: the call is for that job only), 69 or 75 as PID 1 refuses
// the lease, 127 or 126 when cmd is not found or not executable.
func jobExec(args []string) int {
	fs, sock, job := jobFlags("job exec")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 || *job == "" {
		fmt.Fprintln(os.Stderr, "usage: warmpod job exec --job ID -- cmd args...")
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Renew(context.Background(), *job))
	if resp == nil {
		return code
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	env := os.Environ()
	path, err := shellproxy.LookPath(argv[0], env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return shellproxy.ExecErrorCode(err)
	}
	// syscall.Exec, not x/sys/unix's: it holds off new threads for the
	// exec and gives cmd back the open-files limit the Go runtime raised
	// at start. The runtime's signal handlers and the close-on-exec
	// descriptors go with the exec; stdin, stdout, stderr stay.
	err = syscall.Exec(path, argv, env)
	fmt.Fprintln(os.Stderr, "warmpod:", err)
	return shellproxy.ExecErrorCode(err)
}
