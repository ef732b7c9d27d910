//go:build kube

package kubee2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pausingHook writes a hook script for hookrun that runs warmpod's hook
// but, before every run_script_step after the first, touches dir/paused
// and sleeps for pause: a pause between two steps, in which nothing of the
// job runs in its pod. The hook is exec'd, so its parent is hookrun (the
// runner) as with the shim.
func pausingHook(t *testing.T, dir string, pause time.Duration) string {
	t.Helper()
	hook := filepath.Join(dir, "pausing-hook.sh")
	script := fmt.Sprintf(`#!/bin/sh
in=$(cat)
case "$in" in
*'"command":"run_script_step"'*)
	if [ -e %[1]q/steps ]; then touch %[1]q/paused; sleep %[2]d; fi
	touch %[1]q/steps ;;
esac
printf '%%s\n' "$in" > %[1]q/input.json
exec %[3]q < %[1]q/input.json
`, dir, int(pause/time.Second), filepath.Join(hookShim(t), "warmpod-github"))
	require.NoError(t, os.WriteFile(hook, []byte(script), 0o755))
	return hook
}

// An Actions job whose runner pauses between two steps for three times
// the lease TTL: the job's multiplexer renews the lease while the runner
// lives, so the second step runs in the same job and pod. A runner that
// dies during the pause is not renewed for: the lease lapses, the pod ends
// the job and goes, and the multiplexer with it.
func TestGitHubLeaseLivesBetweenSteps(t *testing.T) {
	const ttl, pause = 4 * time.Second, 12 * time.Second
	g := newGHPool(t, 1, false)
	t.Cleanup(func() { killMux(t, g.stateDir()) })
	ex := writeExample(t, map[string]any{"name": "pause", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"steps": []map[string]any{
			{"id": "first", "run": "echo one > /tmp/first-step; echo FIRST"},
			{"id": "second", "run": "echo \"SECOND sees $(cat /tmp/first-step)\""},
		}})
	hookrun := func(t *testing.T, runner string) (*exec.Cmd, string, string) {
		dir := t.TempDir()
		cmd, out := g.hookrun(t, ex, runner, "WARMPOD_GITHUB_LEASE_TTL="+ttl.String())
		for i, a := range cmd.Args {
			if a == "--hook" {
				cmd.Args[i+1] = pausingHook(t, dir, pause)
			}
		}
		return cmd, out, dir
	}

	t.Run("a pause longer than the lease", func(t *testing.T) {
		cmd, out, dir := hookrun(t, "gh-runner-pause")
		log, _ := cmd.CombinedOutput()
		r, _ := readResult(t, out, log)
		require.FileExists(t, filepath.Join(dir, "paused"), "the runner paused between the steps")
		require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
		_, _, lines := r.step(t, "second")
		assert.Contains(t, lines, "SECOND sees one", "the second step ran in the first one's job and pod")
		waitFor(t, 30*time.Second, "the job's multiplexer gone after cleanup_job", func() (bool, string) {
			return len(muxProcs(t, g.stateDir())) == 0, fmt.Sprint(muxProcs(t, g.stateDir()))
		})
		waitIdle(t, g.ns, 1, 2*time.Minute)
	})

	t.Run("the runner dies during the pause", func(t *testing.T) {
		cmd, _, dir := hookrun(t, "gh-runner-pause-killed")
		// A process group of its own: the test kills the runner and its
		// hook, nothing else.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		require.NoError(t, cmd.Start())
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		var claimed string
		waitFor(t, 60*time.Second, "the runner pausing after the first step", func() (bool, string) {
			_, err := os.Stat(filepath.Join(dir, "paused"))
			for _, p := range poolPods(t, g.ns) {
				if p.Metadata.Labels["warmpod.dev/state"] == "claimed" {
					claimed = p.Metadata.Name
				}
			}
			return err == nil && claimed != "", claimed
		})
		require.Len(t, muxProcs(t, g.stateDir()), 1, "the job's multiplexer runs")
		killed := time.Now()
		require.Positive(t, cmd.Process.Pid)
		require.NoError(t, syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL))
		<-done
		waitFor(t, 90*time.Second, "the orphaned pod gone", func() (bool, string) {
			code, _, _ := api.do("GET", podPath(g.ns, claimed), nil)
			return code == 404, fmt.Sprint(code)
		})
		t.Logf("pod %s gone %v after the runner died (lease TTL %s)", claimed, time.Since(killed).Round(100*time.Millisecond), ttl)
		waitFor(t, 30*time.Second, "the job's multiplexer gone with its job", func() (bool, string) {
			return len(muxProcs(t, g.stateDir())) == 0, fmt.Sprint(muxProcs(t, g.stateDir()))
		})
		waitIdle(t, g.ns, 1, 2*time.Minute)
	})
}
