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
		return result(&control.Response{Code: control.ExitDataErr, Error: "job spec: not valid JSON"})
	}
	pid1 := newClient(*sock)
	resp, code := pid1.answer(pid1.Start(context.Background(), line))
	if resp == nil {
		return code
	}
	return result(resp)
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
