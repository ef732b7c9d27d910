package e2e

// PID-1 conformance cases C16 and C17: what a SIGTERM to PID 1 leaves a
// process with a TERM handler. warmpod's promise is one TERM per process
// and --grace for the handler to finish: a process started after the
// SIGTERM was forwarded (the handler's own commands) gets no TERM of its
// own, and a stopped process is continued so that its handler runs.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// cleanupHandler is a process whose TERM handler runs 20 commands (each a
// process started after the SIGTERM), then writes done. A command killed
// by a signal is written to broken: its clean-up was cut short.
const cleanupHandler = `D=$1
trap 'i=0
while [ $i -lt 20 ]; do
  t=$(date +%s%N) || echo "clean-up command $i exited $?" >> "$D/broken"
  i=$((i+1))
done
echo done > "$D/done"; exit 0' TERM
echo up > "$D/up"
while :; do sleep 0.2; done
`

// C16: the clean-up of a TERM handler is not sent a TERM of its own. The
// shutdown sweep comes a few milliseconds after the forward: it used to
// send a TERM to each process the forward had not reached, the handler's
// first commands among them (15 of 30 runs on an idle machine). A race,
// so warmpod runs it 50 times, in plain-init and in warm mode.
func TestConformanceC16CleanupNotTERMedAgain(t *testing.T) {
	const warmpodRuns, anchorRuns = 50, 3
	forEachInit(t, "C16", func(t *testing.T, in string, rec *confRecorder) {
		runs := anchorRuns
		if in == "warmpod" {
			runs = warmpodRuns
		}
		completed, exits, ran := 0, map[string]int{}, 0
		// Recorded however the loop ends (a failed run stops it).
		defer func() { rec.set("clean-up completed %d/%d; %s", completed, ran, describeCounts(exits)) }()
		for i := 0; i < runs; i++ {
			ran++
			dir := confDir(t)
			writeScript(t, dir, "handler.sh", cleanupHandler)
			r := confRun{Init: in, Dir: dir, Cmd: []string{"/bin/sh", "-c", "/bin/sh " + dir + "/handler.sh " + dir + " & wait"}}
			if in == "warmpod" && i%2 == 1 {
				r.WarmpodFlags = []string{"--probe-addr", "", "--control-socket", filepath.Join(dir, "c.sock"),
					"--jobs-dir", filepath.Join(dir, "jobs"), "--grace", "6s", "--idle-timeout", "0"}
			}
			p := startInit(t, r)
			require.True(t, waitFile(filepath.Join(dir, "up"), 10*time.Second), "run %d: the handler did not start\n%s", i, p.logs())
			mustSignalPID1(t, p, unix.SIGTERM)
			if _, ok := p.wait(10 * time.Second); !ok {
				p.kill()
			}
			broken := strings.TrimSpace(readFileString(filepath.Join(dir, "broken")))
			done := readFileString(filepath.Join(dir, "done")) == "done\n"
			if done && broken == "" {
				completed++
			}
			exits[p.desc()]++
			if in == "warmpod" {
				mode := "plain init"
				if r.WarmpodFlags != nil {
					mode = "warm"
				}
				require.Empty(t, broken, "run %d (%s): warmpod cut the TERM handler's clean-up short\n%s", i, mode, p.logs())
				require.True(t, done, "run %d (%s): the clean-up did not finish before PID 1 exited (%s)\n%s", i, mode, p.desc(), p.logs())
				require.Equal(t, "exit 143", p.desc(), "run %d (%s)\n%s", i, mode, p.logs())
			}
			p.cleanup()
		}
	})
}

// stoppedHandler traps TERM, then stops itself (as SIGSTOP or a terminal's
// ^Z would); its trap writes ran.
const stoppedHandler = `D=$1
trap 'echo ran > "$D/ran"; exit 0' TERM
echo up > "$D/up"
kill -STOP $$
while :; do sleep 0.1; done
`

// C17: a stopped process with a TERM handler runs it at shutdown: the
// SIGTERM is followed by SIGCONT (as systemd does), in the shell's group
// (the forward) and outside it (the sweep). Without the SIGCONT it stays
// stopped with its TERM pending and dies of the SIGKILL after --grace.
func TestConformanceC17StoppedProcessRunsItsTrap(t *testing.T) {
	for _, where := range []struct{ id, launch string }{
		{"C17", "/bin/sh %s/handler.sh %s & wait"},
		{"C17-setsid", "setsid /bin/sh %s/handler.sh %s & wait"},
	} {
		t.Run(where.id, func(t *testing.T) {
			forEachInit(t, where.id, func(t *testing.T, in string, rec *confRecorder) {
				dir := confDir(t)
				writeScript(t, dir, "handler.sh", stoppedHandler)
				p := startInit(t, confRun{Init: in, Dir: dir, Cmd: []string{"/bin/sh", "-c", fmt.Sprintf(where.launch, dir, dir)}})
				require.True(t, waitFile(filepath.Join(dir, "up"), 10*time.Second), "the handler did not start\n%s", p.logs())
				require.True(t, waitUntil(10*time.Second, p.hasStopped), "the handler did not stop itself\n%s", p.logs())
				mustSignalPID1(t, p, unix.SIGTERM)
				sent := time.Now()
				_, ok := p.wait(confGrace + 5*time.Second)
				if !ok {
					p.kill()
				}
				ran := readFileString(filepath.Join(dir, "ran")) == "ran\n"
				rec.set("trap ran: %v; %s after %.1fs", ran, p.desc(), p.ended.Sub(sent).Seconds())
				if in == "warmpod" {
					require.True(t, ok, "warmpod did not exit\n%s", p.logs())
					assert.True(t, ran, "the stopped process's TERM trap did not run\n%s", p.logs())
					assert.Equal(t, "exit 143", p.desc(), p.logs())
				}
			})
		})
	}
}

// hasStopped tells whether a descendant of the run is stopped (state T).
func (p *initProc) hasStopped() bool {
	for pid := range p.descendants() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if j := strings.LastIndexByte(s, ')'); j > 0 && len(s) > j+2 && s[j+2] == 'T' {
			return true
		}
	}
	return false
}

// describeCounts writes {"exit 143": 3} as "3× exit 143".
func describeCounts(m map[string]int) string {
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%d× %s", n, k))
	}
	return strings.Join(parts, ", ")
}
