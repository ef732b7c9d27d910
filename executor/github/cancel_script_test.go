package github

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cancelled step's stage script prints the file commands only after
// the step's other processes are gone: the step's shell dies of its TERM
// at once, what it ran runs its trap and prints, and that output comes
// before the marker (after it, it would be read as the file commands).
// The script runs here under each shell the machine has, as PID 1 runs
// it: a session leader that gets the cancel's SIGTERM with its session.
func TestCancelledStepScriptWaitsForItsProcesses(t *testing.T) {
	step := `sh -c 'trap "sleep 0.3; echo TRAP-RAN; exit 143" TERM; while :; do sleep 0.1; done'`
	dir := t.TempDir()
	back := filepath.Join(dir, "set_env")
	require.NoError(t, os.WriteFile(back, []byte("A=1\n"), 0o644))
	var script bytes.Buffer
	writeStepScript(&script, nil, nil, nil, "", []string{"sh", "-e", "-c", step}, []string{back}, "MARKER-42")
	for _, sh := range []string{"/bin/sh", "/bin/dash", "/bin/bash", "/bin/busybox"} {
		if _, err := os.Stat(sh); err != nil {
			continue
		}
		t.Run(filepath.Base(sh), func(t *testing.T) {
			// As PID 1 runs it: the shell and the script's path. Never
			// `sh -c SCRIPT`: the script removes "$0", which would be the
			// shell's own path then.
			f := filepath.Join(t.TempDir(), "stage")
			require.NoError(t, os.WriteFile(f, script.Bytes(), 0o500))
			argv := []string{sh, f}
			if filepath.Base(sh) == "busybox" {
				argv = []string{sh, "sh", f}
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			time.Sleep(300 * time.Millisecond) // the step runs its loop
			pgid := cmd.Process.Pid
			require.Greater(t, pgid, 1)
			// The session this test made. out is read only after Wait:
			// the command's copier writes it until then.
			require.NoError(t, syscall.Kill(-pgid, syscall.SIGTERM))
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				<-done
				t.Fatalf("the script did not end: %s", out.String())
			}
			got := out.String()
			before, after, found := strings.Cut(got, "MARKER-42\n")
			require.True(t, found, got)
			assert.Contains(t, before, "TRAP-RAN", "the trap's output comes before the marker")
			assert.Equal(t, "4\nA=1\n", after, "only the file commands follow the marker")
		})
	}
}
