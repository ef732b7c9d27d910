package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/procscan"
)

// fakeProc writes a /proc tree: self → selfPID, and one stat file per
// process given as pid → ppid.
func fakeProc(t *testing.T, selfPID int, procs map[int]int) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.Symlink(fmt.Sprint(selfPID), filepath.Join(root, "self")))
	for pid, ppid := range procs {
		dir := filepath.Join(root, fmt.Sprint(pid))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		stat := fmt.Sprintf("%d (p%d) S %d %d %d 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n", pid, pid, ppid, pid, pid)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	}
	return root
}

func pids(ps []procscan.Proc) map[int]bool {
	out := map[int]bool{}
	for _, p := range ps {
		out[p.PID] = true
	}
	return out
}

// When /proc does not show warmpod as PID 1 of its own namespace, only its
// descendants may ever be touched.
func TestContainerIsOnlyDescendantsUnlessNamespaceInit(t *testing.T) {
	// 1 is the host's init, 500 is warmpod (not PID 1), 501/502 its tree, 600 a stranger.
	root := fakeProc(t, os.Getpid(), map[int]int{1: 0, 500: 1, 501: 500, 502: 501, 600: 1})
	v := &ProcTable{root: root, self: 500}
	got, err := v.List()
	require.NoError(t, err)
	require.Equal(t, map[int]bool{501: true, 502: true}, pids(got))
}

func TestContainerIsEveryProcessForNamespaceInit(t *testing.T) {
	root := fakeProc(t, 1, map[int]int{1: 0, 20: 1, 21: 0, 22: 21})
	v := &ProcTable{root: root, self: 1, selfNS: true}
	got, err := v.List()
	require.NoError(t, err)
	// runc exec'd processes have PPID 0 inside the namespace: they belong too.
	require.Equal(t, map[int]bool{20: true, 21: true, 22: true}, pids(got))
}

func TestNewProcTableDetectsForeignProc(t *testing.T) {
	// A /proc whose "self" is not our PID belongs to another namespace.
	root := fakeProc(t, os.Getpid()+100000, nil)
	v := NewProcTable(root)
	require.False(t, v.selfNS)
}

func TestAncestors(t *testing.T) {
	procs := []procscan.Proc{{PID: 1}, {PID: 10, PPID: 0}, {PID: 11, PPID: 10}, {PID: 12, PPID: 11}, {PID: 13, PPID: 1}}
	require.Equal(t, map[int]bool{12: true, 11: true, 10: true}, ancestors(procs, 12))
	require.Equal(t, map[int]bool{13: true}, ancestors(procs, 13))
	require.Empty(t, ancestors(procs, 1))
}

func TestOOMKills(t *testing.T) {
	v2 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(v2, "memory.events"), []byte("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n"), 0o644))
	v1 := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(v1, "memory"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(v1, "memory", "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n"), 0o644))
	old := t.TempDir() // v1 before Linux 4.13: no oom_kill line
	require.NoError(t, os.Mkdir(filepath.Join(old, "memory"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(old, "memory", "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\n"), 0o644))
	for name, tc := range map[string]struct {
		root string
		want int
	}{"v2": {v2, 2}, "v1": {v1, 5}, "v1-pre-4.13": {old, 0}, "none": {t.TempDir(), 0}} {
		require.Equal(t, tc.want, oomKills(tc.root), name)
	}
}
