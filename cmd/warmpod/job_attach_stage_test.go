package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/muxproto"
)

// startPID1 runs PID 1 (this test binary in TestMain's child mode) in
// child-subreaper mode on a control socket under a temporary directory,
// with a job started on it; the job is ended (its stages killed after a
// short grace period) and PID 1 killed when the test ends. It returns the
// socket and the job's id.
func startPID1(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "run", "warmpod.sock")
	require.NoError(t, os.MkdirAll(filepath.Dir(sock), 0o755))
	args := []string{
		"--stdio", "pipe", "--stdin-when-idle", "ignore", "--probe-addr", "", "--self-delete", "never",
		"--idle-timeout", "60s", "--grace", "1s",
		"--control-socket", sock,
		"--jobs-dir", filepath.Join(dir, "jobs"),
		"--termination-log", filepath.Join(dir, "termination-log"),
	}
	cmd := pid1Child(args)
	cmd.Stdin = strings.NewReader("") // its shell's stdin: nothing
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	c := control.Client{Socket: sock, Timeout: 10 * time.Second}
	job := "attach-" + strconv.Itoa(os.Getpid())
	t.Cleanup(func() {
		_, _ = c.End(context.Background(), job)
		_ = cmd.Process.Kill() // our child, not yet waited for
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("PID 1's log:\n%s", log.String())
		}
	})
	require.Eventually(t, func() bool {
		r, err := c.Probe(context.Background(), "ready")
		return err == nil && r.OK
	}, 10*time.Second, 20*time.Millisecond, "PID 1 never became ready")
	r, err := c.Start(context.Background(), json.RawMessage(`{"id":"`+job+`","nonce":"n1","timeout":"1m","variables":[]}`))
	require.NoError(t, err)
	require.True(t, r.OK, "job start: %s", r.Error)
	return sock, job
}

// attachRun is a `job attach` served in this test's process, and what it
// sent back, by channel.
type attachRun struct {
	sock string
	in   *io.PipeWriter
	w    *muxproto.Writer
	done chan struct{} // closed when serve has returned code
	code int

	mu     sync.Mutex
	stdout map[uint32]*bytes.Buffer
	stderr map[uint32]*bytes.Buffer
	exits  map[uint32]muxproto.Exit
}

// serveAttach serves job on sock. exe is a path that cannot run: a call
// that attach started as a child process would fail.
func serveAttach(t *testing.T, sock, job string) *attachRun {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &attachRun{sock: sock, in: inW, w: muxproto.NewWriter(inW), done: make(chan struct{}),
		stdout: map[uint32]*bytes.Buffer{}, stderr: map[uint32]*bytes.Buffer{}, exits: map[uint32]muxproto.Exit{}}
	a := &attacher{exe: "/nonexistent/warmpod", sock: sock, job: job, w: muxproto.NewWriter(outW), calls: map[uint32]*attachCall{}, seen: true}
	go func() {
		r.code = a.serve(context.Background(), inR)
		close(r.done)
		_ = outW.Close()
	}()
	go func() {
		fr := muxproto.NewReader(outR)
		for {
			f, err := fr.Read()
			if err != nil {
				return
			}
			r.mu.Lock()
			switch f.Type {
			case muxproto.TypeStdout, muxproto.TypeStderr:
				m := r.stdout
				if f.Type == muxproto.TypeStderr {
					m = r.stderr
				}
				if m[f.Channel] == nil {
					m[f.Channel] = &bytes.Buffer{}
				}
				m[f.Channel].Write(f.Payload)
			case muxproto.TypeExit:
				var x muxproto.Exit
				if assert.NoError(t, muxproto.Decode(f, &x)) {
					r.exits[f.Channel] = x
				}
			}
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = inW.Close()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("attach did not end with its stream")
		}
	})
	return r
}

// stage opens channel ch with a `job stage` of script.
// The argv names the socket, as the executor's does when the pod's is not
// the default.
func (r *attachRun) stage(t *testing.T, ch uint32, job, name, script string) {
	t.Helper()
	sum := sha256.Sum256([]byte(script))
	require.NoError(t, r.w.WriteJSON(muxproto.TypeOpen, ch, muxproto.Open{Argv: []string{"/nonexistent/warmpod", "job", "stage", "--control-socket", r.sock,
		"--job", job, "--stage", name, "--size", strconv.Itoa(len(script)), "--sha256", hex.EncodeToString(sum[:]), "--shell", "/bin/sh"}}))
	require.NoError(t, r.w.WriteData(muxproto.TypeStdin, ch, []byte(script)))
}

// exit waits for channel ch's Exit.
func (r *attachRun) exit(t *testing.T, ch uint32) muxproto.Exit {
	t.Helper()
	var x muxproto.Exit
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		var ok bool
		x, ok = r.exits[ch]
		return ok
	}, 20*time.Second, 5*time.Millisecond, "no Exit on channel %d", ch)
	return x
}

func (r *attachRun) out(ch uint32) (string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var o, e string
	if b := r.stdout[ch]; b != nil {
		o = b.String()
	}
	if b := r.stderr[ch]; b != nil {
		e = b.String()
	}
	return o, e
}

// `job stage` runs in attach's own process (issue 30: a child process per
// step was a part of its overhead) and does for the executor what the
// command does: the output on stdout, the status line when it runs and
// when it has ended on stderr, the stage's exit code in the Exit frame,
// stage after stage; a script that does not match its
// digest refused with 65 as the command refuses it. The exe attach was
// given cannot run, so none of this was a child process.
func TestJobAttachRunsStagesInItsOwnProcess(t *testing.T) {
	sock, job := startPID1(t)
	r := serveAttach(t, sock, job)
	r.stage(t, 1, job, "build", "echo one; sleep 0.2; echo two; exit 3\n")
	assert.Equal(t, muxproto.Exit{Code: 3}, r.exit(t, 1))
	r.stage(t, 2, job, "test", "echo other\n")
	assert.Equal(t, muxproto.Exit{Code: 0}, r.exit(t, 2))
	out, errOut := r.out(1)
	assert.Equal(t, "one\ntwo\n", out)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	require.Len(t, lines, 2, "%s", errOut)
	assert.Regexp(t, `^\{"stage":"build","pid":[1-9][0-9]*,"running":true,`, lines[0])
	assert.Regexp(t, `^\{"stage":"build",.*"running":false,"exit_code":3,`, lines[1])
	out, _ = r.out(2)
	assert.Equal(t, "other\n", out)

	// The same stage name with another script: refused, nothing run.
	require.NoError(t, r.w.WriteJSON(muxproto.TypeOpen, 3, muxproto.Open{Argv: []string{"/nonexistent/warmpod", "job", "stage", "--control-socket", r.sock,
		"--job", job, "--stage", "build", "--size", "5", "--sha256", strings.Repeat("0", 64)}}))
	require.NoError(t, r.w.WriteData(muxproto.TypeStdin, 3, []byte("true\n")))
	assert.Equal(t, muxproto.Exit{Code: control.ExitDataErr}, r.exit(t, 3))
	_, errOut = r.out(3)
	assert.Contains(t, errOut, "warmpod: job stage:")
}

// A Close stops a `job stage` call that attach runs in its own process as
// the kill stopped the child it once was: the call ends at once, the
// stage goes on under PID 1, and a call that names it again with --offset
// streams the rest of its output without running it again. The end of
// the stream stops the calls still running and attach returns.
func TestJobAttachStopsAStageCallItRuns(t *testing.T) {
	sock, job := startPID1(t)
	r := serveAttach(t, sock, job)
	gate := filepath.Join(t.TempDir(), "go") // the stage ends once it exists
	script := "echo first; while [ ! -e " + gate + " ]; do sleep 0.05; done; echo second\n"
	r.stage(t, 1, job, "long", script)
	require.Eventually(t, func() bool { o, _ := r.out(1); return o == "first\n" }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r.w.Write(muxproto.TypeClose, 1, nil))
	x := r.exit(t, 1)
	assert.Contains(t, x.Error, "stopped", "a stopped call's fate is unknown, as a killed child's was: the executor reattaches")
	c := control.Client{Socket: sock, Timeout: 10 * time.Second}
	resp, err := c.JobStatus(context.Background(), job, "long")
	require.NoError(t, err)
	st, err := resp.StageStatus()
	require.NoError(t, err)
	assert.True(t, st.Running, "the stage goes on under PID 1")

	// Let the stage end, and resume its output after the bytes received.
	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	sum := sha256.Sum256([]byte(script))
	require.NoError(t, r.w.WriteJSON(muxproto.TypeOpen, 2, muxproto.Open{Argv: []string{"/nonexistent/warmpod", "job", "stage", "--control-socket", r.sock,
		"--job", job, "--stage", "long", "--size", strconv.Itoa(len(script)), "--sha256", hex.EncodeToString(sum[:]), "--shell", "/bin/sh",
		"--offset", strconv.Itoa(len("first\n"))}}))
	require.NoError(t, r.w.WriteData(muxproto.TypeStdin, 2, []byte(script)))
	assert.Equal(t, muxproto.Exit{Code: 0}, r.exit(t, 2))
	out, _ := r.out(2)
	assert.Equal(t, "second\n", out, "the rest of the output, the stage run once")

	// A call still running when the stream ends is stopped, and attach
	// returns.
	r.stage(t, 3, job, "again", "sleep 30\n")
	require.Eventually(t, func() bool { _, e := r.out(3); return strings.Contains(e, `"running":true`) }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, r.in.Close())
	select {
	case <-r.done:
		assert.Zero(t, r.code)
	case <-time.After(10 * time.Second):
		t.Fatal("attach did not stop the call when its stream ended")
	}
}

// A call stopped before its stage runs (a Close while its script is still
// coming, or before any of it) ends with an Exit whose fate is unknown,
// as a killed child's did, not with the exit code of what the stop caused
// (65 for a short script, 69 for a cancelled request to PID 1), which the
// executor would take for the step's final failure. Nothing ran.
func TestJobAttachStoppedBeforeTheStageIsUnknown(t *testing.T) {
	sock, job := startPID1(t)
	r := serveAttach(t, sock, job)
	script := "echo ran\n"
	sum := sha256.Sum256([]byte(script))
	for ch, sent := range map[uint32]string{1: "", 2: script[:3]} {
		require.NoError(t, r.w.WriteJSON(muxproto.TypeOpen, ch, muxproto.Open{Argv: []string{"/nonexistent/warmpod", "job", "stage", "--control-socket", sock,
			"--job", job, "--stage", fmt.Sprintf("s%d", ch), "--size", strconv.Itoa(len(script)), "--sha256", hex.EncodeToString(sum[:]), "--shell", "/bin/sh"}}))
		if sent != "" {
			require.NoError(t, r.w.WriteData(muxproto.TypeStdin, ch, []byte(sent)))
		}
		require.NoError(t, r.w.Write(muxproto.TypeClose, ch, nil))
		x := r.exit(t, ch)
		assert.Contains(t, x.Error, "stopped", "channel %d (%q of the script sent)", ch, sent)
	}
	c := control.Client{Socket: sock, Timeout: 10 * time.Second}
	resp, err := c.JobStatus(context.Background(), job, "")
	require.NoError(t, err)
	assert.NotContains(t, string(resp.Data), `"stage":"s`, "no stage started")
}
