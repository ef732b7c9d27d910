package main

import (
	"context"

	"github.com/warmpod/warmpod/control"
)

func jobEnd(args []string) int {
	fs, sock := clientFlags("job end")
	job := fs.String("job", "", "end only if this job holds the lease")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.End(context.Background(), *job))
	if resp == nil {
		return code
	}
	return result(resp)
}
