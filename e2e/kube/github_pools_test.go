//go:build kube

package kubee2e

// The hook's pools, through hookrun (issue 29): read from the cluster as
// warmpod-gitlab reads them (no --pools: the pool Deployments, their live
// templates, the current ReplicaSet's pod-template-hash), so a pool edited
// in place is the next job's pool and a pod of its old template is never
// claimed; and --pools FILE, which still works without any right on
// Deployments.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// notAPool is a Deployment labelled as a pool whose selector would keep
// a claimed pod: the hook leaves it out and says so.
const notAPool = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: not-a-pool
  labels: {app.kubernetes.io/name: warmpod, app.kubernetes.io/component: pool}
spec:
  replicas: 0
  selector: {matchLabels: {warmpod.dev/pool: not-a-pool}}
  template:
    metadata:
      labels: {warmpod.dev/pool: not-a-pool, warmpod.dev/state: idle}
    spec:
      containers:
      - {name: job, image: localhost/hooks/job:v1, imagePullPolicy: Never, command: [/warmpod/warmpod]}
`

// editStep is a job of the fixture's job image whose step prints the pod's
// E2E_EDIT (the pool template's environment, which a job inherits).
func editStep(t *testing.T) string {
	return writeExample(t, map[string]any{"name": "edit", "expect": "success",
		"container": map[string]any{"image": "localhost/hooks/job:v1"},
		"steps":     []map[string]any{{"id": "edit", "run": `echo "JOB-OUTPUT: edit=${E2E_EDIT:-none}"`}}})
}

// warnings are the ::warning:: annotations of a job.
func (r *hookResult) warnings() []string {
	var out []string
	for _, a := range r.Annotations {
		if a.Type == "warning" {
			out = append(out, a.Message)
		}
	}
	return out
}

func TestGitHubHookPoolsFromTheCluster(t *testing.T) {
	g := newGHPool(t, 1, false)
	require.Empty(t, g.poolsFile, "no --pools")
	cmd := exec.Command(kubectl, "apply", "-n", g.ns, "-f", "-")
	cmd.Stdin = strings.NewReader(notAPool)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	names := func(ps []pod) map[string]bool {
		m := map[string]bool{}
		for _, p := range ps {
			m[p.Metadata.Name] = true
		}
		return m
	}

	t.Run("an example job runs warm on a pod of the pool", func(t *testing.T) {
		idle := names(waitIdle(t, g.ns, 1, 2*time.Minute))
		r, log := g.run(t, "pass.json", "gh-runner-cluster")
		require.Equal(t, r.Expect, r.Result, "hookrun:\n%s", log)
		assert.True(t, idle[r.Container.ID], "the job ran on %s, not one of the pool's idle pods %v", r.Container.ID, idle)
		ws := r.warnings()
		require.Len(t, ws, 2, "s3's own warning and the one Deployment left out: %q", ws)
		assert.Contains(t, ws, "a warning from s3")
		assert.Contains(t, strings.Join(ws, "\n"), `warmpod: not a usable pool: pool manifest: Deployment "not-a-pool": its selector must match`)
	})

	// The pool's template changed in place: the Deployment controller rolls
	// it, one new pod first (maxSurge 1, maxUnavailable 0), so the old
	// pod stays Ready and idle meanwhile.
	old := names(waitIdle(t, g.ns, 1, 2*time.Minute))
	out, err = exec.Command(kubectl, "set", "env", "-n", g.ns, "deployment/hooks-job", "E2E_EDIT=edited").CombinedOutput()
	require.NoError(t, err, "%s", out)

	t.Run("at once, mid-rollout, the old template's pod is not claimed", func(t *testing.T) {
		r, log := g.run(t, editStep(t), "gh-runner-edit-1")
		require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
		assert.False(t, old[r.Container.ID], "the job ran on %s, a pod of the old template", r.Container.ID)
		_, _, lines := r.step(t, "edit")
		assert.Contains(t, lines, "JOB-OUTPUT: edit=edited", "the live template's environment")
	})

	t.Run("once rolled, jobs run warm on the new template's pods", func(t *testing.T) {
		var fresh map[string]bool
		waitFor(t, 3*time.Minute, "the rollout to leave one Ready idle pod, of the new template", func() (bool, string) {
			ps := poolPods(t, g.ns)
			fresh = names(ps)
			var desc []string
			for _, p := range ps {
				desc = append(desc, p.Metadata.Name+":"+p.Metadata.Labels["warmpod.dev/state"])
			}
			return len(ps) == 1 && !old[ps[0].Metadata.Name] && ps[0].ready() && ps[0].Metadata.Labels["warmpod.dev/state"] == "idle", strings.Join(desc, " ")
		})
		r, log := g.run(t, editStep(t), "gh-runner-edit-2")
		require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
		assert.True(t, fresh[r.Container.ID], "the job ran on %s, not the new idle pod %v", r.Container.ID, fresh)
		_, _, lines := r.step(t, "edit")
		assert.Contains(t, lines, "JOB-OUTPUT: edit=edited")
	})
	waitIdle(t, g.ns, 1, 2*time.Minute)
}

// --pools FILE stays an option: pools whose warmpod reads the hand-set
// warmpod.dev/config label, its value printed by `pool-hash`, read from
// the same file the test applies. The hook's account has no right on
// Deployments or ReplicaSets (the Role's fourth rule, after pods,
// pods/exec and pods/resize, is removed): it reads none.
func TestGitHubHookPoolsFromAFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "deploy/kube-e2e/github-pool.yaml"))
	require.NoError(t, err)
	s := strings.ReplaceAll(string(raw), `metadata.labels['pod-template-hash']`, `metadata.labels['warmpod.dev/config']`)
	require.Equal(t, 2, strings.Count(s, `metadata.labels['warmpod.dev/config']`), "both pools' warmpod read the hash label")
	file := filepath.Join(t.TempDir(), "github-pool.yaml")
	require.NoError(t, os.WriteFile(file, []byte(s), 0o644))
	out, err := exec.Command(driverBinary(t), "--pools", file, "pool-hash").Output()
	require.NoError(t, err)
	hashes := regexp.MustCompile(`(?m)^([a-z-]+)\twarmpod.dev/config=([0-9a-f]{32})$`).FindAllStringSubmatch(string(out), -1)
	require.Len(t, hashes, 2, "pool-hash printed %q", out)
	for _, h := range hashes {
		pl := "        warmpod.dev/pool: " + h[1] + "\n"
		require.Contains(t, s, pl)
		s = strings.Replace(s, pl, pl+`        warmpod.dev/config: "`+h[2]+`"`+"\n", 1)
	}
	require.NoError(t, os.WriteFile(file, []byte(s), 0o644))

	g := newGHPoolFrom(t, 1, false, file)
	g.poolsFile = file
	out, err = exec.Command(kubectl, "patch", "role", "-n", g.ns, "warmpod-github", "--type=json",
		"-p", `[{"op":"test","path":"/rules/3/apiGroups/0","value":"apps"},{"op":"remove","path":"/rules/3"}]`).CombinedOutput()
	require.NoError(t, err, "%s", out)
	idle := map[string]bool{}
	for _, p := range waitIdle(t, g.ns, 1, 2*time.Minute) {
		idle[p.Metadata.Name] = true
	}
	r, log := g.run(t, "pass.json", "gh-runner-file")
	require.Equal(t, r.Expect, r.Result, "hookrun:\n%s", log)
	assert.True(t, idle[r.Container.ID], "the job ran on %s, not one of the pool's idle pods %v", r.Container.ID, idle)
	assert.Equal(t, []string{"a warning from s3"}, r.warnings(), "the file's hashes are its templates'")
	waitIdle(t, g.ns, 1, 2*time.Minute)
}
