package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/shellproxy"
)

func jobRun(args []string) int {
	fs, sock, job := jobFlags("job run")
	detach := fs.Bool("detach", false, "run as a stage of PID 1 and return at once (needs --stage)")
	stageName := fs.String("stage", "", "stage name (with --detach): its output goes to the job log between marker lines")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 || *detach != (*stageName != "") {
		fmt.Fprintln(os.Stderr, "usage: warmpod job run [--job ID] [--detach --stage NAME] -- command args...")
		return control.ExitUsage
	}
	if *detach {
		dir, _ := os.Getwd()
		pid1 := newClient(*sock)
		resp, code := pid1.answer(pid1.Stage(context.Background(), control.StageRequest{Job: *job, Stage: *stageName, Argv: argv, Dir: dir}))
		if resp == nil {
			return code
		}
		if !resp.OK {
			return result(resp)
		}
		fmt.Println(string(resp.Data))
		return 0
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Env(context.Background(), *job))
	if resp == nil {
		return code
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
		return resp.Code
	}
	env := mergeEnv(os.Environ(), resp.Env)
	for i := range resp.Env {
		resp.Env[i] = ""
	}
	// The command is found in the job's PATH, as a stage's is.
	path, err := shellproxy.LookPath(argv[0], env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return shellproxy.ExecErrorCode(err)
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Args[0] = argv[0]
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if resp.User != "" {
		cred, err := control.ParseUser(resp.User)
		if err != nil {
			fmt.Fprintln(os.Stderr, "warmpod: job user:", err)
			return control.ExitSoftware
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGWINCH)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return shellproxy.ExecErrorCode(err)
	}
	go func() {
		for sig := range sigs {
			_ = cmd.Process.Signal(sig)
		}
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod:", err)
		return 1
	}
	return 0
}

// mergeEnv overlays the job's "KEY=VALUE" entries on base.
func mergeEnv(base, job []string) []string {
	keys := make(map[string]bool, len(job))
	for _, kv := range job {
		k, _, _ := strings.Cut(kv, "=")
		keys[k] = true
	}
	out := make([]string, 0, len(base)+len(job))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !keys[k] {
			out = append(out, kv)
		}
	}
	return append(out, job...)
}
