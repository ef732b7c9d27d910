//go:build kube

package kubee2e

// A job's services reached by name from its steps, through hookrun:
// warm, on a pool of deploy/kube-e2e/github-pool.yaml whose pods run the
// service and map its name (hostAliases), and cold, for a service no pool
// runs.

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fetchStep is a step that fetches http://HOST:PORT/PATH (the service may
// still be starting: 30 tries), prints what it got and the hosts entry of
// HOST.
func fetchStep(id, host, port, path string) map[string]any {
	return map[string]any{"id": id, "run": "grep -w " + host + " /etc/hosts; for i in $(seq 1 30); do out=$(wget -q -O - http://" + host + ":" + port + "/" + path + ") && break; sleep 1; done; echo \"" + host + " says: $out\""}
}

func TestGitHubHookServicesByName(t *testing.T) {
	g := newGHPool(t, 1, false)

	t.Run("a job with the pool's service runs warm and reaches it by its name", func(t *testing.T) {
		out, err := exec.Command(kubectl, "scale", "-n", g.ns, "deployment/hooks-job-svc", "--replicas", "1").CombinedOutput()
		require.NoError(t, err, "%s", out)
		waitIdle(t, g.ns, 2, 3*time.Minute)
		ex := writeExample(t, map[string]any{"name": "svc-warm", "expect": "success",
			"container": map[string]any{"image": "localhost/hooks/job:v1"},
			"services":  []map[string]any{{"name": "svc", "image": "localhost/hooks/svc:v1", "ports": []string{"18080"}}},
			"steps":     []map[string]any{fetchStep("get", "svc", "18080", "")}})
		r, log := g.run(t, ex, "gh-runner-svc-warm")
		require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
		assert.Contains(t, r.Container.ID, "hooks-job-svc-", "a pod of the service's pool")
		assert.NotContains(t, r.Container.ID, "-cold-", "warm")
		_, _, lines := r.step(t, "get")
		all := strings.Join(lines, "\n")
		assert.Regexp(t, `(?m)^127\.0\.0\.1\s.*\bsvc\b`, all, "the pool's hostAliases in the pod's /etc/hosts")
		assert.Contains(t, all, "svc says: hello from the service container")
		out, err = exec.Command(kubectl, "scale", "-n", g.ns, "deployment/hooks-job-svc", "--replicas", "0").CombinedOutput()
		require.NoError(t, err, "%s", out)
		waitIdle(t, g.ns, 1, 3*time.Minute)
	})

	t.Run("a service no pool runs gets a cold pod that maps its name", func(t *testing.T) {
		// The job image's busybox httpd as the service, on a port of its
		// own, serving the image's /etc: the upstream hook would name its
		// container "job".
		ex := writeExample(t, map[string]any{"name": "svc-cold", "expect": "success",
			"container": map[string]any{"image": "localhost/hooks/job:v1"},
			"services": []map[string]any{{"name": "websvc", "image": "localhost/hooks/job:v1", "ports": []string{"18093"},
				"entrypoint": "httpd", "args": "-f -p 18093 -h /etc"}},
			"steps": []map[string]any{fetchStep("get", "job", "18093", "os-release")}})
		r, log := g.run(t, ex, "gh-runner-svc-cold")
		require.Equal(t, "success", r.Result, "hookrun:\n%s", log)
		assert.Contains(t, r.Container.ID, "-cold-", "no pool runs that service")
		_, _, lines := r.step(t, "get")
		all := strings.Join(lines, "\n")
		assert.Regexp(t, `(?m)^127\.0\.0\.1\s.*\bjob\b`, all, "the cold pod's hostAliases in its /etc/hosts")
		assert.Contains(t, all, "job says: PRETTY_NAME=")
	})
	waitFor(t, 60*time.Second, "only the pool's idle pods left", func() (bool, string) {
		left := jobPods(t, g.ns)
		return len(left) == 0, strings.Join(left, " ")
	})
}
