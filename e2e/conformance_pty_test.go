package e2e

// PID-1 conformance, terminal cases: C14 and the pty items P-a … P-f (C12 and
// C13 among them). The test makes a pty pair; the slave is stdin, stdout and
// stderr of `unshare … setsid --ctty <init> …`, so the init is PID 1 and
// session leader with that terminal as controlling tty (what a container
// runtime does for `-t`). warmpod runs with --stdio auto (⇒ pty mode). Shell
// output is matched with arithmetic markers (`echo X$((1+1))` ⇒ X2) so the
// terminal's echo of the input can never satisfy an assertion; \r\n is
// tolerated everywhere.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// ptySession is one init run on a pty made by the test.
type ptySession struct {
	t      *testing.T
	p      *initProc
	dir    string
	master *os.File
	before *unix.Termios // outer terminal settings before the start

	mu     sync.Mutex
	buf    []byte
	eof    chan struct{} // closed when the master read fails (EIO: every slave closed)
	eofErr error
}

var promptRE = regexp.MustCompile(`P42> `)

func bashInteractive() []string {
	return []string{"/bin/bash", "--norc", "--noprofile", "--noediting", "-i"}
}

// startPTY starts init with cmd on a fresh pty of rows×cols.
func startPTY(t *testing.T, in string, cmd []string, rows, cols uint16) *ptySession {
	t.Helper()
	master, tty, err := pty.Open()
	require.NoError(t, err)
	require.NoError(t, pty.Setsize(master, &pty.Winsize{Rows: rows, Cols: cols}))
	s := &ptySession{t: t, master: master, eof: make(chan struct{}), dir: confDir(t)}
	s.before, err = unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	require.NoError(t, err)
	var flags []string
	if in == "warmpod" {
		flags = append(warmpodDefaultFlags(s.dir), "--stdio", "auto")
	}
	s.p = startInit(t, confRun{Init: in, Dir: s.dir, TTY: tty, Cmd: cmd, WarmpodFlags: flags,
		Env: []string{"TERM=dumb", "PS1=P$((6*7))> ", "HISTFILE=/dev/null"}})
	// Our copy of the slave must go, or the master never reports EIO.
	_ = tty.Close()
	go func() {
		b := make([]byte, 32<<10)
		for {
			n, err := master.Read(b)
			if n > 0 {
				s.mu.Lock()
				s.buf = append(s.buf, b[:n]...)
				s.mu.Unlock()
			}
			if err != nil {
				s.mu.Lock()
				s.eofErr = err
				s.mu.Unlock()
				close(s.eof)
				return
			}
		}
	}()
	t.Cleanup(func() {
		s.p.kill() // before closing the master: no hang-up races in the test
		_ = master.Close()
		if t.Failed() {
			t.Logf("terminal output:\n%q", s.output())
		}
	})
	return s
}

func (s *ptySession) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.buf)
}

func (s *ptySession) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.buf)
}

// send types str and returns the output offset from which to expect its effect.
func (s *ptySession) send(str string) int {
	pos := s.mark()
	if _, err := s.master.Write([]byte(str)); err != nil {
		s.t.Logf("write to master: %v", err)
	}
	return pos
}

// expect waits until re matches the output after from; it returns the
// submatches or nil after d.
func (s *ptySession) expect(re *regexp.Regexp, from int, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		var m []string
		if from <= len(s.buf) {
			m = re.FindStringSubmatch(string(s.buf[from:]))
		}
		s.mu.Unlock()
		if m != nil || time.Now().After(deadline) {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// prompt waits for the first bash prompt.
func (s *ptySession) prompt() bool {
	return s.expect(promptRE, 0, 15*time.Second) != nil
}

// termios returns the outer terminal's settings (TCGETS on the master
// reports the slave's termios).
func (s *ptySession) termios() (*unix.Termios, error) {
	rc, err := s.master.SyscallConn()
	if err != nil {
		return nil, err
	}
	var tio *unix.Termios
	var ierr error
	if err := rc.Control(func(fd uintptr) { tio, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		return nil, err
	}
	return tio, ierr
}

// finish waits for the init to exit and for EIO on the master.
func (s *ptySession) finish(d time.Duration) (exited, eof bool) {
	_, exited = s.p.wait(d)
	select {
	case <-s.eof:
		eof = true
	case <-time.After(5 * time.Second):
	}
	return exited, eof
}

func sameTermios(a, b *unix.Termios) bool {
	return a.Iflag == b.Iflag && a.Oflag == b.Oflag && a.Cflag == b.Cflag && a.Lflag == b.Lflag && a.Cc == b.Cc
}

func termiosDesc(tio *unix.Termios) string {
	var on []string
	for _, f := range []struct {
		bit  uint32
		name string
	}{{unix.ICANON, "icanon"}, {unix.ECHO, "echo"}, {unix.ISIG, "isig"}} {
		if tio.Lflag&f.bit != 0 {
			on = append(on, f.name)
		} else {
			on = append(on, "-"+f.name)
		}
	}
	return strings.Join(on, " ")
}

// C14: no SIGHUP/SIGCONT reaches the child at start-up (dumb-init#136: an
// init that is session leader and detaches from the tty with TIOCNOTTY makes
// the kernel send both to the foreground group).
func TestConformanceC14NoHupContAtStart(t *testing.T) {
	forEachInit(t, "C14", func(t *testing.T, in string, rec *confRecorder) {
		d := confDir(t)
		script := writeScript(t, d, "c14.sh", `trap 'echo HUP >> `+d+`/log' HUP
trap 'echo CONT >> `+d+`/log' CONT
echo ok > `+d+`/ready
sleep 1
exit 0
`)
		s := startPTY(t, in, []string{"/bin/sh", script}, 24, 80)
		exited, _ := s.finish(15 * time.Second)
		got := strings.Fields(readFileString(filepath.Join(d, "log")))
		started := waitFile(filepath.Join(d, "ready"), 0)
		switch {
		case !started:
			rec.set("command never ran (%s)", s.p.desc())
		case len(got) == 0:
			rec.set("none; %s", s.p.desc())
		default:
			rec.set("child got %s; %s", strings.Join(got, "+"), s.p.desc())
		}
		if in == "warmpod" {
			require.True(t, exited, "warmpod did not exit")
			assert.True(t, started, "command never ran")
			assert.Empty(t, got, "signals the child received at start-up")
			assert.Equal(t, "exit 0", s.p.desc())
		}
	})
}

// P-a + P-b: the shell gets a controlling terminal and job control; the outer
// terminal is raw while warmpod runs and restored when it exits.
func TestConformancePTYJobControlAndRawMode(t *testing.T) {
	ttyRE := regexp.MustCompile(`TTY2=(\S+) CT3=(\S+)`)
	jobRE := regexp.MustCompile(`\[1\]\+?\s+\d+\s+Running\s+sleep 100`)
	jcRE := regexp.MustCompile(`(NO)?JC7`)
	// P-b is observed in the same sessions and recorded as its own row.
	type rawObs struct {
		during, after *unix.Termios
		before        *unix.Termios
	}
	obs := map[string]*rawObs{}
	var mu sync.Mutex
	forEachInit(t, "P-a", func(t *testing.T, in string, rec *confRecorder) {
		s := startPTY(t, in, bashInteractive(), 40, 100)
		require.True(t, s.prompt(), "no prompt")
		m := s.expect(ttyRE, s.send("echo TTY$((1+1))=$(tty) CT$((2+1))=$(ps -o tty= -p $$)\n"), 5*time.Second)
		if m == nil {
			m = []string{"", "?", "?"}
		}
		during, err := s.termios()
		require.NoError(t, err)
		job := s.expect(jobRE, s.send("set -m; sleep 100 & jobs -l\n"), 5*time.Second) != nil
		jc := s.expect(jcRE, s.send("case $- in *m*) echo JC$((3+4));; *) echo NOJC$((3+4));; esac\n"), 5*time.Second)
		s.send("kill %1; exit\n")
		exited, _ := s.finish(10 * time.Second)
		after, err := s.termios()
		require.NoError(t, err)
		mu.Lock()
		obs[in] = &rawObs{during: during, after: after, before: s.before}
		mu.Unlock()
		jcs := "no answer"
		if jc != nil {
			jcs = map[bool]string{true: "no job control", false: "job control"}[jc[1] == "NO"]
		}
		rec.set("tty %s, ctty %s, %s, bg job listed %v; %s", m[1], m[2], jcs, job, s.p.desc())
		if in == "warmpod" {
			require.True(t, exited, "warmpod did not exit after `exit`")
			assert.Regexp(t, `^/dev/pts/\d+$`, m[1], "tty of the shell")
			assert.Regexp(t, `^pts/\d+$`, m[2], "controlling tty of the shell (ps -o tty)")
			assert.True(t, job, "`jobs -l` does not list the background job")
			assert.Equal(t, "job control", jcs)
			assert.Equal(t, "exit 0", s.p.desc())
		}
	})
	forEachInit(t, "P-b", func(t *testing.T, in string, rec *confRecorder) {
		mu.Lock()
		o := obs[in]
		mu.Unlock()
		if o == nil {
			rec.set("no observation (P-a failed early)")
			if in == "warmpod" {
				t.Fatal("no observation")
			}
			return
		}
		restored := sameTermios(o.before, o.after)
		rec.set("during: %s; after: %s", termiosDesc(o.during),
			map[bool]string{true: "restored", false: "changed to " + termiosDesc(o.after)}[restored])
		if in == "warmpod" {
			assert.Zero(t, o.during.Lflag&(unix.ICANON|unix.ECHO), "outer terminal not raw while warmpod runs: %s", termiosDesc(o.during))
			assert.True(t, restored, "outer terminal not restored at exit: before %+v after %+v", o.before, o.after)
		}
	})
}

// P-c: the initial window size reaches the shell, and a resize followed by
// SIGWINCH to PID 1 does too.
func TestConformancePTYWindowSize(t *testing.T) {
	sizeRE := regexp.MustCompile(`SZ2 (\d+ \d+)`)
	forEachInit(t, "P-c", func(t *testing.T, in string, rec *confRecorder) {
		s := startPTY(t, in, bashInteractive(), 40, 100)
		require.True(t, s.prompt(), "no prompt")
		const ask = "echo SZ$((1+1)) $(stty size)\n"
		first := "none"
		if m := s.expect(sizeRE, s.send(ask), 5*time.Second); m != nil {
			first = m[1]
		}
		require.NoError(t, pty.Setsize(s.master, &pty.Winsize{Rows: 60, Cols: 120}))
		mustSignalPID1(t, s.p, unix.SIGWINCH)
		second := "none"
		waitUntil(5*time.Second, func() bool {
			if m := s.expect(sizeRE, s.send(ask), time.Second); m != nil {
				second = m[1]
			}
			return second == "60 120"
		})
		s.send("exit\n")
		exited, _ := s.finish(10 * time.Second)
		rec.set("start %s, after resize %s", first, second)
		if in == "warmpod" {
			assert.Equal(t, "40 100", first, "initial size inside")
			assert.Equal(t, "60 120", second, "size inside after resize + SIGWINCH")
			assert.True(t, exited)
		}
	})
}

// P-d (C12): ^D typed on the terminal is end of input for `tac`.
func TestConformancePTYEOFReachesTac(t *testing.T) {
	tacRE := regexp.MustCompile(`beta\r?\nalpha`) // the echo shows alpha first
	forEachInit(t, "P-d", func(t *testing.T, in string, rec *confRecorder) {
		s := startPTY(t, in, bashInteractive(), 24, 80)
		require.True(t, s.prompt(), "no prompt")
		require.NotNil(t, s.expect(regexp.MustCompile(`TAC2`), s.send("echo TAC$((1+1)); tac; echo TACEND$((2+2))\n"), 5*time.Second))
		running := s.p.waitDescendant("tac", 5*time.Second)
		time.Sleep(200 * time.Millisecond)
		pos := s.send("alpha\nbeta\n")
		s.send("\x04")
		reversed := s.expect(tacRE, pos, 5*time.Second) != nil
		ended := s.expect(regexp.MustCompile(`TACEND4`), pos, 5*time.Second) != nil
		s.send("exit\n")
		exited, _ := s.finish(10 * time.Second)
		switch {
		case reversed && ended:
			rec.set("tac printed beta, alpha and ended")
		case reversed:
			rec.set("tac printed but no EOF")
		default:
			rec.set("tac running %v, output %v, ended %v", running, reversed, ended)
		}
		if in == "warmpod" {
			assert.True(t, reversed, "tac did not print its input reversed")
			assert.True(t, ended, "^D did not end tac's input")
			assert.True(t, exited)
		}
	})
}

// P-e (C13): ^C kills the foreground `sleep` of an interactive shell and the
// prompt comes back; ^C to a plain `sleep 100` command ⇒ PID 1 exits 130.
func TestConformancePTYCtrlC(t *testing.T) {
	forEachInit(t, "P-e", func(t *testing.T, in string, rec *confRecorder) {
		s := startPTY(t, in, bashInteractive(), 24, 80)
		require.True(t, s.prompt(), "no prompt")
		require.NotNil(t, s.expect(regexp.MustCompile(`SL2`), s.send("echo SL$((1+1)); sleep 100\n"), 5*time.Second))
		s.p.waitDescendant("sleep", 5*time.Second)
		time.Sleep(200 * time.Millisecond)
		s.send("\x03")
		back := s.expect(regexp.MustCompile(`AFTER4`), s.send("echo AFTER$((2+2))\n"), 5*time.Second) != nil
		s.send("exit\n")
		s.finish(10 * time.Second)

		s2 := startPTY(t, in, []string{"sleep", "100"}, 24, 80)
		s2.p.waitDescendant("sleep", 5*time.Second)
		if in == "warmpod" { // let warmpod put the outer terminal in raw mode
			waitUntil(3*time.Second, func() bool {
				tio, err := s2.termios()
				return err == nil && tio.Lflag&unix.ISIG == 0
			})
		}
		time.Sleep(200 * time.Millisecond)
		s2.send("\x03")
		exited, _ := s2.finish(5 * time.Second)
		rec.set("fg job interrupted: %v; `sleep 100` + ^C ⇒ %s", back, s2.p.desc())
		if in == "warmpod" {
			assert.True(t, back, "prompt did not come back after ^C")
			assert.True(t, exited, "PID 1 did not exit after ^C")
			assert.Equal(t, "exit 130", s2.p.desc())
		}
	})
}

// warmpodLogRE matches a log line warmpod writes to the same terminal.
var warmpodLogRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT[^\n]*\[(TRACE|DEBUG|INFO|WARN|ERROR)\][^\n]*\n`)

// P-f: 200 KB written by the command just before it exits all arrive on the
// outer master (read until EIO).
func TestConformancePTYOutputTail(t *testing.T) {
	forEachInit(t, "P-f", func(t *testing.T, in string, rec *confRecorder) {
		d := confDir(t)
		data := make([]byte, 200000)
		_, err := rand.Read(data)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(d, "data"), data, 0o644))
		s := startPTY(t, in, []string{"/bin/sh", "-c", "base64 -w0 " + d + "/data; echo END"}, 24, 80)
		exited, eof := s.finish(20 * time.Second)
		out := warmpodLogRE.ReplaceAllString(s.output(), "")
		want := base64.StdEncoding.EncodeToString(data)
		got := ""
		if i := strings.LastIndex(out, "END"); i >= 0 { // "END" may also occur inside base64
			got = out[:i]
			if j := strings.LastIndexAny(got, "\r\n"); j >= 0 {
				got = got[j+1:]
			}
		}
		lost := len(want) - len(got)
		same := got == want
		switch {
		case same:
			rec.set("all %d bytes + END; EIO %v; %s", len(data), eof, s.p.desc())
		case got == "":
			rec.set("END missing (%d bytes read); %s", len(out), s.p.desc())
		default:
			dec, _ := base64.StdEncoding.DecodeString(got)
			rec.set("%d base64 chars lost/garbled (prefix ok %v); %s", lost, bytes.HasPrefix(data, dec[:min(len(dec), 100)]), s.p.desc())
		}
		if in == "warmpod" {
			assert.True(t, exited)
			assert.True(t, eof, "no EIO on the outer master")
			assert.True(t, same, "tail lost: got %d of %d base64 chars", len(got), len(want))
			assert.Equal(t, "exit 0", s.p.desc())
		}
	})
}
