package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/warmpod/warmpod/control"
)

func jobStatus(args []string) int {
	fs, sock, job := jobFlags("job status")
	stage := fs.String("stage", "", "only this stage")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.JobStatus(context.Background(), *job, *stage))
	if resp == nil {
		return code
	}
	if !resp.OK {
		return result(resp)
	}
	fmt.Println(string(resp.Data))
	return 0
}

// jobWait waits for a stage to end: exit 0 when it has (its outcome is in
// the JSON printed), 75 when it still runs after --timeout.
func jobWait(args []string) int {
	fs, sock, job := jobFlags("job wait")
	stage := fs.String("stage", "", "stage to wait for (required)")
	timeout := fs.Duration("timeout", time.Hour, "give up after this long (exit 75)")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if *stage == "" {
		fmt.Fprintln(os.Stderr, "usage: warmpod job wait --stage NAME [--timeout D]")
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Wait(context.Background(), *job, *stage, *timeout))
	if resp == nil {
		return code
	}
	if len(resp.Data) > 0 {
		fmt.Println(string(resp.Data))
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod:", resp.Error)
	}
	return resp.Code
}

func jobCancel(args []string) int {
	fs, sock, job := jobFlags("job cancel")
	grace := fs.Duration("grace", 0, "SIGTERM → SIGKILL delay (default: PID 1's --grace)")
	stage := fs.String("stage", "", "cancel only this stage; the job goes on (GitLab's graceful cancel runs after_script next)")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Cancel(context.Background(), *job, *stage, *grace))
	if resp == nil {
		return code
	}
	return result(resp)
}
