package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/jobspec"
)

func jobStart(args []string) int {
	fs, sock := clientFlags("job start")
	if !parseClient(fs, args) {
		return control.ExitUsage
	}
	line, err := readSpecLine(os.Stdin, jobspec.MaxSpecBytes, specReadTimeout)
	if err != nil {
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: " + err.Error()})
	}
	defer clear(line)
	if !json.Valid(line) {
		// Refused here, before a dial; ParseSpec says where, by byte
		// offset, as `job check` does.
		_, err := jobspec.ParseSpec(line)
		return result(&control.Response{Code: control.ExitDataErr, Error: err.Error()})
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Start(context.Background(), line))
	if resp == nil {
		return code
	}
	return result(resp)
}

// jobCheck checks the job spec line on stdin as PID 1's job start would
// (jobspec.ParseSpec: syntax by byte offset, each field's rules), without
// a PID 1: exit 0 and {"job":ID,"ok":true} when it is good, 65 and the
// JSON answer job start would give when not. What only PID 1 knows (its
// --config-hash, another job holding the lease) is not checked.
func jobCheck(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "usage: warmpod job check < spec.json   (one JSON job spec line on stdin)")
		return control.ExitUsage
	}
	line, err := readSpecLine(os.Stdin, jobspec.MaxSpecBytes, specReadTimeout)
	if err != nil {
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: " + err.Error()})
	}
	defer clear(line)
	spec, err := jobspec.ParseSpec(line)
	if err != nil {
		return result(&control.Response{Code: control.ExitDataErr, Error: err.Error()})
	}
	defer spec.Wipe()
	return result(&control.Response{OK: true, Job: spec.ID})
}

// readSpecLine reads one line (without needing EOF) of at most max bytes
// within timeout.
func readSpecLine(r io.Reader, max int, timeout time.Duration) ([]byte, error) {
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := control.ReadLine(bufio.NewReaderSize(r, 64<<10), max)
		if errors.Is(err, io.EOF) || err == nil && len(bytes.TrimSpace(b)) == 0 {
			err = errors.New("empty input")
		}
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("no complete line on stdin within %s", timeout)
	}
}
