package main

import (
	"context"
	"fmt"
	"os"

	"github.com/warmpod/warmpod/control"
)

func debugCmd(args []string) int {
	fs, sock := clientFlags("debug")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if fs.NArg() != 2 || fs.Arg(0) != "stall" {
		fmt.Fprintln(os.Stderr, "usage: warmpod debug stall DURATION   (test hook; PID 1 needs WARMPOD_TEST_HOOKS=1)")
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Stall(context.Background(), fs.Arg(1)))
	if resp == nil {
		return code
	}
	return result(resp)
}
