package github

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/poolapi"
)

// A workflow controls run_script_step's entryPointArgs (a custom
// `shell: bash {0} /__w/_temp/../_actions/OWNER/REPO/REF/tok`: the runner
// splits the shell string on spaces), and any action it `uses:` is
// unpacked by the runner on the host with `tar -xzf`, symbolic links kept.
// Such an argument must not carry a file of the runner's host outside
// _work/_temp (here a stand-in for the runner pod's service-account token
// or the runner's .credentials_rsaparams) into the job's pod: the prefix
// is checked on the cleaned path, and the file is read only when it is a
// regular file directly in _temp, not through a symbolic link. (Found by
// a hostile review: the prefix used to be checked on the raw argument.)
func TestHostileEntryArgCannotReadHostFileThroughActionSymlink(t *testing.T) {
	r := newRunner(t)
	secret := filepath.Join(r.root, "runner-sa-token")
	require.NoError(t, os.WriteFile(secret, []byte("eyJhbGciOi-RUNNER-SA-TOKEN"), 0o600))
	// What the runner's `tar -xzf` of the attacker's action leaves in
	// _work/_actions: a symbolic link out of _work (absolute here; a
	// relative ../../../../../x works the same).
	require.NoError(t, os.MkdirAll(filepath.Join(r.work, "_actions/evil/act/v1"), 0o755))
	require.NoError(t, os.Symlink(secret, filepath.Join(r.work, "_actions/evil/act/v1/tok")))
	r.write("_temp/abc.sh", `cat "$1"`)

	f := &fakeCluster{}
	h, _, _ := r.hook(f)
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
	code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "bash",
		EntryPointArgs: []string{"/__w/_temp/abc.sh", "/__w/_temp/../_actions/evil/act/v1/tok"}}, state, nil)
	assert.Equal(t, 0, code)
	require.Len(t, f.scripts, 1)
	assert.NotContains(t, f.scripts[0], "RUNNER-SA-TOKEN", "a host file outside _work must not reach the pod")
}

// Nor may a FIFO (or /dev/zero: unbounded memory) hang the hook before
// any stage exists: the read is non-blocking, of regular files only, and
// bounded.
func TestHostileEntryArgToFIFODoesNotHangTheHook(t *testing.T) {
	r := newRunner(t)
	fifo := filepath.Join(r.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no mkfifo:", err)
	}
	require.NoError(t, os.MkdirAll(filepath.Join(r.work, "_actions/evil/act/v1"), 0o755))
	require.NoError(t, os.Symlink(fifo, filepath.Join(r.work, "_actions/evil/act/v1/tok")))
	r.write("_temp/abc.sh", "true")
	f := &fakeCluster{}
	h, _, _ := r.hook(f)
	state, _ := json.Marshal(State{Job: "gh-1", Pod: poolapi.Pod{Name: "w1", Bin: "/warmpod/warmpod"}, Runner: "runner-0"})
	done := make(chan int, 1)
	go func() {
		code, _ := r.call(h, CmdRunScriptStep, ScriptStepArgs{EntryPoint: "bash",
			EntryPointArgs: []string{"/__w/_temp/abc.sh", "/__w/_temp/../_actions/evil/act/v1/tok"}}, state, nil)
		done <- code
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		// Unblock the open so the goroutine ends with the test.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		t.Error("run_script_step blocked on a host FIFO reached through a symbolic link under _work")
	}
}
