//go:build kube

package kubee2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/podapi"
)

// probeFailures are the kubelet's events for failed, erroring or warning probes.
func probeFailures(evs []event) []string {
	var out []string
	for _, e := range evs {
		if e.Reason == "Unhealthy" || e.Reason == "ProbeWarning" || strings.Contains(e.Message, "probe errored") {
			out = append(out, fmt.Sprintf("%s %s x%d: %s", e.Type, e.Reason, e.Count, e.Message))
		}
	}
	return out
}

func terminationMessage(t testing.TB, ts *terminatedState) podapi.TerminationMessage {
	t.Helper()
	require.NotNil(t, ts)
	require.NotEmpty(t, ts.Message, "no termination message (PID 1 writes one JSON line to /dev/termination-log)")
	require.LessOrEqual(t, len(ts.Message), podapi.MaxTerminationMessage)
	var m podapi.TerminationMessage
	require.NoError(t, json.Unmarshal([]byte(ts.Message), &m), "termination message is not JSON: %q", ts.Message)
	return m
}

// 1. A warm pod becomes Ready through warmpod's /readyz, with no probe failure.
func TestWarmPodReady(t *testing.T) {
	ns := newNamespace(t, "ready", true)
	start := time.Now()
	w := createWarmPod(t, ns, "warm", warmOpts{})
	took := waitReady(t, ns, w.name, true, 60*time.Second)
	t.Logf("create → Ready %.2fs (probe port %d)", took.Seconds(), w.port)

	code, body := httpGet(w.port, "/readyz?verbose")
	require.Equal(t, 200, code, body)
	require.Contains(t, body, "readyz check passed")
	code, body = httpGet(w.port, "/livez")
	require.Equal(t, 200, code, body)

	out, stderr, rc := kexec(t, w, "", 30*time.Second, "warmpod", "status")
	require.Equal(t, 0, rc, stderr)
	var st struct {
		State string `json:"state"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Equal(t, "idle", st.State)

	// Let a few readiness (2 s) and one liveness (10 s) period pass: no probe
	// may have failed since the container started.
	time.Sleep(time.Until(start.Add(14 * time.Second)))
	p := getPod(t, ns, w.name)
	require.True(t, p.ready())
	require.Equal(t, 0, p.Status.ContainerStatuses[0].RestartCount)
	// One readiness probe refused before PID 1 has bound the probe port is a
	// start-up race on a loaded node (seen at load average ~20: the kubelet
	// probes as soon as it sees the container running); it is logged, not
	// failed. Any other probe failure fails the test.
	for _, f := range probeFailures(podEvents(t, ns, w.name)) {
		if strings.Contains(f, "Readiness probe failed") && strings.Contains(f, "connection refused") && strings.Contains(f, " x1:") {
			t.Logf("WARNING: start-up race, the first readiness probe came before the probe port was bound: %s", f)
			continue
		}
		t.Errorf("probe failure in the pod's events: %s", f)
	}
	desc, _ := exec.Command(kubectl, "describe", "pod", "-n", ns, w.name).CombinedOutput()
	require.NotContains(t, string(desc), "Liveness probe failed")
}

// 2. Job hand-over through kubectl exec: token and variables on stdin, visible
// to `job run`; NotReady while the job holds the lease, Ready after job end.
func TestJobHandover(t *testing.T) {
	ns := newNamespace(t, "job", true)
	// --max-jobs=0: the pod must come back to Ready after the job (the
	// default, 1, drains a single-use pod at job end).
	w := createWarmPod(t, ns, "warm", warmOpts{args: []string{"--idle-timeout=10m", "--grace=20s", "--max-jobs=0"}})
	waitReady(t, ns, w.name, true, 60*time.Second)

	const token = "glcbt-e2e-secret-7f3a"
	spec := `{"id":"e2e-1","nonce":"n1","token":"` + token + `","variables":[{"key":"VAR","value":"hello world"},{"key":"FILEVAR","value":"in a file","file":true}]}` + "\n"
	t0 := time.Now()
	out, stderr, rc := kexec(t, w, spec, 30*time.Second, "warmpod", "job", "start")
	require.Equal(t, 0, rc, "job start: %s %s", out, stderr)
	var ack struct {
		OK    bool   `json:"ok"`
		Job   string `json:"job"`
		State string `json:"state"`
	}
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &ack), out)
	require.Equal(t, struct {
		OK    bool   `json:"ok"`
		Job   string `json:"job"`
		State string `json:"state"`
	}{true, "e2e-1", "busy"}, ack)
	waitReady(t, ns, w.name, false, 15*time.Second)
	t.Logf("job start → pod NotReady (API) %.2fs", time.Since(t0).Seconds())

	out, stderr, rc = kexec(t, w, "", 30*time.Second, "warmpod", "job", "run", "--", "sh", "-c", `echo "$CI_JOB_TOKEN $VAR"; cat "$FILEVAR"`)
	require.Equal(t, 0, rc, stderr)
	require.Equal(t, token+" hello world\nin a file", out)

	// A second claim while busy is refused with 75 (retry on another pod).
	_, _, rc = kexec(t, w, `{"id":"e2e-2"}`+"\n", 30*time.Second, "warmpod", "job", "start")
	require.Equal(t, 75, rc)

	// The secret is in no status, probe answer or container log.
	status, _, _ := kexec(t, w, "", 30*time.Second, "warmpod", "status")
	require.NotContains(t, status, token)
	_, body := httpGet(w.port, "/status")
	require.NotContains(t, body, token)

	t1 := time.Now()
	out, stderr, rc = kexec(t, w, "", 60*time.Second, "warmpod", "job", "end")
	require.Equal(t, 0, rc, "job end: %s %s", out, stderr)
	require.Contains(t, out, `"state":"idle"`)
	waitReady(t, ns, w.name, true, 15*time.Second)
	t.Logf("job end → pod Ready again (API) %.2fs", time.Since(t1).Seconds())

	out, _, rc = kexec(t, w, "", 30*time.Second, "warmpod", "job", "run", "--", "sh", "-c", `echo "[$CI_JOB_TOKEN]"`)
	require.Equal(t, 69, rc, "job run without a job: %s", out)
	require.NotContains(t, podLog(t, ns, w.name), token)
	// Readiness fails on purpose while busy (that is how NotReady shows);
	// liveness never may.
	for _, f := range probeFailures(podEvents(t, ns, w.name)) {
		require.NotContains(t, f, "Liveness")
		t.Logf("expected while busy: %s", f)
	}
}

// 3. Idle deadline: PID 1 drains, deletes its own pod (RBAC from
// deploy/rbac.yaml) and exits 0; the Secret owned by the pod is then
// garbage-collected. Without the RoleBinding the pod ends Succeeded and the
// log names the missing rule.
func TestIdleSelfDeletion(t *testing.T) {
	const idle = 20 * time.Second
	args := []string{"--idle-timeout=" + idle.String(), "--grace=5s"}

	t.Run("with RBAC", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, "selfdel", true)
		w := createWarmPod(t, ns, "warm", warmOpts{args: args})
		watch := watchPod(t, ns, w.name, w.rv)
		waitReady(t, ns, w.name, true, 60*time.Second)
		readyAt := time.Now()
		logs := followLog(t, ns, w.name)

		secret := "job-secret-" + randHex(3)
		api.must(t, 201, "POST", "/api/v1/namespaces/"+ns+"/secrets", map[string]any{
			"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": secret, "ownerReferences": []any{map[string]any{
				"apiVersion": "v1", "kind": "Pod", "name": w.name, "uid": w.uid, "blockOwnerDeletion": false,
			}}},
			"stringData": map[string]string{"token": "s3cr3t"},
		})
		time.Sleep(2 * time.Second) // a wrong ownerReference would get it deleted at once
		api.must(t, 200, "GET", "/api/v1/namespaces/"+ns+"/secrets/"+secret, nil)

		select {
		case <-watch.deleted:
		case <-time.After(idle + 90*time.Second):
			p := getPod(t, ns, w.name)
			t.Fatalf("pod not deleted %s after Ready (idle timeout %s); phase %s; log:\n%s", time.Since(readyAt), idle, p.Status.Phase, logs.String())
		}
		t.Logf("Ready → pod object gone %.1fs (idle timeout %s)", time.Since(readyAt).Seconds(), idle)
		gone := waitFor(t, 60*time.Second, "owned Secret garbage-collected", func() (bool, string) {
			code, _, _ := api.do("GET", "/api/v1/namespaces/"+ns+"/secrets/"+secret, nil)
			return code == 404, fmt.Sprintf("GET secret: %d", code)
		})
		t.Logf("pod gone → owned Secret gone %.1fs", gone.Seconds())

		last, _ := watch.lastTerminated()
		require.NotNil(t, last, "the watch never saw the container terminated")
		ts := last.terminated()
		require.Equal(t, 0, ts.ExitCode, "PID 1 exits 0 after an idle drain; log:\n%s", logs.String())
		m := terminationMessage(t, ts)
		require.Equal(t, "idle-timeout", m.Reason)
		require.Equal(t, 0, m.ExitCode)
		t.Logf("termination message: %s", ts.Message)
		t.Logf("container log:\n%s", logs.String())
	})

	t.Run("without RBAC", func(t *testing.T) {
		t.Parallel()
		ns := newNamespace(t, "norbac", false)
		w := createWarmPod(t, ns, "warm", warmOpts{args: args})
		waitReady(t, ns, w.name, true, 60*time.Second)
		readyAt := time.Now()
		waitFor(t, idle+90*time.Second, "pod Succeeded", func() (bool, string) {
			p := getPod(t, ns, w.name)
			require.NotNil(t, p, "pod deleted although its service account may not delete pods")
			require.NotEqual(t, "Failed", p.Status.Phase)
			return p.Status.Phase == "Succeeded", "phase " + p.Status.Phase
		})
		t.Logf("Ready → Succeeded %.1fs", time.Since(readyAt).Seconds())
		p := getPod(t, ns, w.name)
		ts := p.terminated()
		require.Equal(t, 0, ts.ExitCode)
		m := terminationMessage(t, ts)
		require.Equal(t, "idle-timeout", m.Reason)

		log := podLog(t, ns, w.name)
		var rule string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, "delete") && strings.Contains(l, "pods") {
				rule = l
				break
			}
		}
		require.NotEmpty(t, rule, "the log names the missing RBAC rule (delete on pods); log:\n%s", log)
		require.Contains(t, rule, ns, "…in the pod's namespace")
		t.Logf("log line naming the rule: %s", rule)
	})
}

// 4. `kubectl delete pod` during a job: the job's shell gets SIGTERM (its trap
// runs), PID 1 exits 143 well within the grace, and the termination message
// says why.
func TestDeleteDuringJob(t *testing.T) {
	ns := newNamespace(t, "sigterm", true)
	const grace = 20 * time.Second
	// The finalizer keeps the pod object after deletion so its final status
	// can be read; the namespace clean-up removes it.
	w := createWarmPod(t, ns, "warm", warmOpts{args: []string{"--idle-timeout=10m", "--grace=" + grace.String()}, finalizer: true})
	waitReady(t, ns, w.name, true, 60*time.Second)
	logs := followLog(t, ns, w.name)

	_, stderr, rc := kexec(t, w, `{"id":"e2e-del","token":"glcbt-del"}`+"\n", 30*time.Second, "warmpod", "job", "start")
	require.Equal(t, 0, rc, stderr)
	// The job's shell reads the container's stdin (attach-style executors).
	kattach(t, w, "trap 'echo trapped-by-job; echo trapped >> /tmp/x; exit 0' TERM; echo job-shell-armed; sleep 1000 & wait\n")
	logs.waitFor(t, "job-shell-armed", 20*time.Second)

	api.must(t, 200, "DELETE", podPath(ns, w.name), nil)
	var ts *terminatedState
	took := waitFor(t, 45*time.Second, "container terminated after delete", func() (bool, string) {
		p := getPod(t, ns, w.name)
		require.NotNil(t, p)
		ts = p.terminated()
		return ts != nil, "phase " + p.Status.Phase
	})
	t.Logf("DELETE → container terminated seen in the API %.2fs (grace %s, terminationGracePeriodSeconds 30)", took.Seconds(), grace)
	require.Less(t, took, grace, "PID 1 exits within --grace")
	require.Equal(t, 143, ts.ExitCode, "exit 143 after SIGTERM; log:\n%s", logs.String())

	select {
	case <-logs.done:
	case <-time.After(10 * time.Second):
	}
	require.Contains(t, logs.String(), "trapped-by-job", "the job's TERM trap ran before PID 1 exited")
	require.NotContains(t, logs.String(), "glcbt-del")

	m := terminationMessage(t, ts)
	t.Logf("termination message: %s", ts.Message)
	require.Equal(t, "sigterm", m.Reason)
	require.Equal(t, 143, m.ExitCode)
	require.Equal(t, "e2e-del", m.Job)
	require.NotContains(t, ts.Message, "glcbt-del")
}

// 5. Liveness: a stalled supervisor loop fails /livez and the real kubelet
// kills the container (restartPolicy Never: the pod ends Failed).
func TestLivenessDetectsStall(t *testing.T) {
	ns := newNamespace(t, "live", true)
	w := createWarmPod(t, ns, "warm", warmOpts{
		args:  []string{"--idle-timeout=10m", "--grace=2s"},
		env:   map[string]string{"WARMPOD_TEST_HOOKS": "1"},
		grace: 5,
	})
	waitReady(t, ns, w.name, true, 60*time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	stall := exec.CommandContext(ctx, kubectl, "exec", "-n", ns, w.name, "-c", container, "--", "warmpod", "debug", "stall", "60s")
	stallOut := make(chan string, 1)
	go func() { out, err := stall.CombinedOutput(); stallOut <- fmt.Sprintf("%s (%v)", out, err) }()
	t0 := time.Now()

	// /livez turns 503 once the loop has not turned for 5 s.
	waitFor(t, 20*time.Second, "/livez 503 during the stall", func() (bool, string) {
		select {
		case s := <-stallOut:
			if !strings.Contains(s, `"ok":true`) && !strings.Contains(s, "<nil>") {
				t.Fatalf("warmpod debug stall failed: %s", s)
			}
			t.Logf("warmpod debug stall 60s: %s", s)
		default:
		}
		code, body := httpGet(w.port, "/livez?verbose")
		return code == 503, fmt.Sprintf("%d %s", code, body)
	})
	_, body := httpGet(w.port, "/livez?verbose")
	t.Logf("/livez after %.1fs of stall:\n%s", time.Since(t0).Seconds(), body)

	var seen []string
	// v1.34's Killing event says "Stopping container helper"; the cause is the
	// Unhealthy/Liveness event before it.
	waitFor(t, 60*time.Second, "kubelet events: Liveness probe failed, then Killing", func() (bool, string) {
		evs := podEvents(t, ns, w.name)
		unhealthy, killing := false, false
		seen = seen[:0]
		for _, e := range evs {
			seen = append(seen, e.Reason+": "+e.Message)
			unhealthy = unhealthy || (e.Reason == "Unhealthy" && strings.Contains(e.Message, "Liveness probe failed"))
			killing = killing || e.Reason == "Killing"
		}
		return unhealthy && killing, strings.Join(seen, "; ")
	})
	t.Logf("stall → kubelet killed the container after %.1fs; events: %s", time.Since(t0).Seconds(), strings.Join(seen, "; "))

	waitFor(t, 60*time.Second, "pod Failed", func() (bool, string) {
		p := getPod(t, ns, w.name)
		return p != nil && p.Status.Phase == "Failed", "phase " + p.Status.Phase
	})
	p := getPod(t, ns, w.name)
	ts := p.terminated()
	require.NotNil(t, ts)
	require.NotEqual(t, 0, ts.ExitCode, "a liveness kill must not look like success")
	t.Logf("container terminated: exit %d reason %s message %q", ts.ExitCode, ts.Reason, ts.Message)
}
