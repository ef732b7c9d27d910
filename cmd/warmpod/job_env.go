package main

import (
	"context"
	"fmt"
	"os"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/jobspec"
)

func jobEnv(args []string) int {
	fs, sock, job := jobFlags("job env")
	if !parseClient(fs, args) {
		return control.ExitUsage
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
	if err := jobspec.RenderExports(os.Stdout, resp.Env); err != nil {
		return 1
	}
	return 0
}
