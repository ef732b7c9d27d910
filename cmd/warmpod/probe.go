package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/warmpod/warmpod/control"
)

func probeCmd(args []string) int {
	fs, sock := clientFlags("probe")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "live" && fs.Arg(0) != "ready") {
		fmt.Fprintln(os.Stderr, "usage: warmpod probe live|ready")
		return control.ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := control.Client{Socket: *sock}.Probe(ctx, fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "warmpod: probe:", err)
		return 1
	}
	if !resp.OK {
		fmt.Fprintln(os.Stderr, "warmpod: probe failed:", resp.Error)
		return 1
	}
	return 0
}

func statusCmd(args []string) int {
	fs, sock := clientFlags("status")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Status(context.Background()))
	if resp == nil {
		return code
	}
	_, _ = os.Stdout.Write(append(resp.Status, '\n'))
	return 0
}
