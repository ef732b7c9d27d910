//go:build kube

package kubee2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A GitHub job's own cpu and memory (issue "Step 20"), asked the ways
// its users ask for them: the workflow's container.options and the hook
// template's "$job" container. A warm pod is resized in place (the job
// runs on the pod that was idle, its cgroup has the new limits, no
// container restarted); a job no node can hold is refused before any
// pod is claimed.
func TestGitHubHookJobResources(t *testing.T) {
	g := newGHPool(t, 1, false)
	cgroup := `echo "JOB-OUTPUT: memory limit $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max)"
echo "JOB-OUTPUT: cpu quota $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 /sys/fs/cgroup/cpu.max)"`
	job := func(name, options string) string {
		c := map[string]any{"image": "localhost/hooks/job:v1"}
		if options != "" {
			c["options"] = options
		}
		return writeExample(t, map[string]any{"name": name, "repository": "hookrun/hello", "expect": "success",
			"container": c, "steps": []map[string]any{{"id": "cgroup", "run": cgroup}}})
	}
	resized := func(t *testing.T, example string, memory, quota string, env ...string) {
		t.Helper()
		idle := waitIdle(t, g.ns, 1, 2*time.Minute)
		w := watchRestarts(t, g.ns)
		r, log := g.run(t, example, "gh-runner-res", env...)
		w.end()
		require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
		assert.Equal(t, idle[0].Metadata.Name, r.Container.ID, "the job ran on the pod that was idle: warm, not cold")
		_, _, lines := r.step(t, "cgroup")
		out := strings.Join(lines, "\n")
		assert.Contains(t, out, "JOB-OUTPUT: memory limit "+memory)
		assert.Contains(t, out, "JOB-OUTPUT: cpu quota "+quota)
		n, seen := w.restarts(r.Container.ID)
		assert.True(t, seen, "the watch saw pod %s", r.Container.ID)
		assert.Equal(t, 0, n, "no container restarted")
	}

	t.Run("container.options: a warm pod is resized in place", func(t *testing.T) {
		// 1.5 CPUs: a quota of 150000 µs per 100000 µs period; 300m: 300 MiB.
		resized(t, job("options", "--cpus 1.5 --memory 300m"), "314572800", "150000")
	})

	t.Run("the hook template's $job resources", func(t *testing.T) {
		tmpl := filepath.Join(t.TempDir(), "template.yaml")
		require.NoError(t, os.WriteFile(tmpl, []byte("spec:\n  containers:\n  - name: $job\n    resources: {limits: {cpu: 500m, memory: 200Mi}}\n"), 0o644))
		resized(t, job("template", ""), "209715200", "50000", "ACTIONS_RUNNER_CONTAINER_HOOK_TEMPLATE="+tmpl)
	})

	t.Run("a request no node can hold is refused before any pod is claimed", func(t *testing.T) {
		// Nodes are cluster-scoped: the ClusterRole of
		// deploy/github-rbac.yaml, bound to this namespace's hook account.
		crb := "warmpod-github-nodes-" + g.ns
		out, err := exec.Command(kubectl, "create", "clusterrolebinding", crb, "--clusterrole=warmpod-github-nodes",
			"--serviceaccount="+g.ns+":warmpod-github").CombinedOutput()
		require.NoError(t, err, "%s", out)
		t.Cleanup(func() { _ = exec.Command(kubectl, "delete", "clusterrolebinding", crb, "--ignore-not-found").Run() })
		before := waitIdle(t, g.ns, 1, 2*time.Minute)
		r, log := g.run(t, job("too-big", "--memory-reservation 4000g --memory 4000g"), "gh-runner-res")
		assert.Equal(t, "failure", r.Result, "hookrun:\n%s", log)
		var errs []string
		for _, a := range r.Annotations {
			if a.Type == "error" {
				errs = append(errs, a.Message)
			}
		}
		assert.Regexp(t, `the job's pod would request cpu=10m memory=4000Gi, more than any node of pool hooks-job can allocate \(127\.0\.0\.1: cpu=\d+ memory=\d+\w*\)`, strings.Join(errs, "\n"), "hookrun:\n%s", log)
		after := poolPods(t, g.ns)
		require.Len(t, after, len(before), "no pod claimed or created")
		assert.Equal(t, before[0].Metadata.Name, after[0].Metadata.Name)
		assert.Equal(t, "idle", after[0].Metadata.Labels["warmpod.dev/state"])
	})
}
