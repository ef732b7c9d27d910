//go:build kube

package kubee2e

// GitLab artifacts and caches of 100 MiB each way on warm pods (issue 30;
// `make bench-gitlab-transfer`, skipped unless WARMPOD_KUBE_TRANSFER_BENCH
// names the results file). A producer job writes a 100 MiB artifact and a
// 100 MiB cache of random bytes (compression cannot shrink them) and
// prints their SHA-256; archive_cache and upload_artifacts_on_success
// carry them out of the pod. A consumer job on the next pod gets them back
// (download_artifacts, restore_cache) and its script checks the same
// SHA-256 (a mismatch fails the job). The bytes never pass through the
// driver: the pod's gitlab-runner-helper zips them and sends the artifact
// over HTTP to the coordinator (here the fixture's mock, on 127.0.0.1:
// kube-e2e pods share the node's network) and writes the cache archive to
// the cache volume (a hostPath here, a ReadWriteMany claim in
// deploy/pool.yaml). The anchor is a bare exec of the same size in the same
// pod, just before its job, through the driver's client library: 100 MiB
// into `cat > /dev/null` (and into `wc -c`, which counts them), and 100
// MiB out of `cat FILE`. Breakdown: each
// stage's driver call against the stage's own time in the pod (PID 1's
// record), and the helper's cache archive and extraction of the same bytes
// run by a bare exec in the same pod (no warmpod in the way: what the
// stock Kubernetes executor's helper does too).

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// transferSize is the artifact's and the cache's size: 100 MiB each.
const transferSize = 100 << 20

// transferBench is what one run of the transfer bench collected, per
// measure, one sample per round (wall times).
type transferBench map[string][]time.Duration

func (b transferBench) add(k string, d time.Duration) { b[k] = append(b[k], d) }

func (b transferBench) median(k string) time.Duration {
	s := append([]time.Duration(nil), b[k]...)
	if len(s) == 0 {
		return 0
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// rate is transferSize over d, in MiB/s.
func rate(d time.Duration) float64 { return float64(transferSize) / (1 << 20) / d.Seconds() }

// podExec runs argv in pod's build container with a new client, as a
// driver call does, and returns its wall time; the command must exit 0.
func podExec(t *testing.T, kubeconfig string, pd poolapi.Pod, argv []string, stdin io.Reader, stdout io.Writer) time.Duration {
	t.Helper()
	t0 := time.Now()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	k := &pool.Cluster{CS: cs, Config: rc, Namespace: pd.Namespace}
	if stdout == nil {
		stdout = io.Discard
	}
	var errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code, err := k.Exec(ctx, pd, argv, stdin, stdout, &errb)
	require.NoError(t, err, "exec %v in %s", argv, pd.Name)
	require.Equal(t, 0, code, "exec %v in %s: %s", argv, pd.Name, errb.String())
	return time.Since(t0)
}

// countWriter counts what it is given.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// anchorAndHelper measures, in the only idle pod of p (the one its next
// job gets), the bare exec each way (role+" exec in": 100 MiB into the
// pod; role+" exec out": out of it) and the helper's own cache archive
// and extraction of 100 MiB; it returns the pod's name.
func anchorAndHelper(t *testing.T, p *glrPool, b transferBench, payload []byte, role string) string {
	t.Helper()
	pods := waitIdle(t, p.ns, 1, 3*time.Minute)
	pd := poolapi.Pod{Name: pods[0].Metadata.Name, Namespace: p.ns, Container: "build"}
	// cat waited for by the shell: `sh -c "cat > /dev/null"` alone (the
	// shell execs cat) ended about 100 ms into the 100 MiB on this node,
	// exit 0, and client-go logged a reset of its stdin copy: not an anchor.
	var ok bytes.Buffer
	b.add(role+" exec in", podExec(t, p.kubeconfig, pd, []string{"sh", "-c", "cat > /dev/null && echo ok"}, bytes.NewReader(payload), &ok))
	require.Equal(t, "ok\n", ok.String())
	// The same into `wc -c`: the count proves the stream delivers every
	// byte at about that rate.
	var count bytes.Buffer
	b.add(role+" exec in counted", podExec(t, p.kubeconfig, pd, []string{"wc", "-c"}, bytes.NewReader(payload), &count))
	require.Equal(t, fmt.Sprint(transferSize), strings.TrimSpace(count.String()), "bytes into the bare exec")
	sh := func(script string) time.Duration {
		return podExec(t, p.kubeconfig, pd, []string{"sh", "-c", script}, nil, nil)
	}
	sh(fmt.Sprintf("mkdir -p /builds/xfer/vendor && head -c %d /dev/urandom > /builds/xfer/vendor/blob", transferSize))
	var got countWriter
	b.add(role+" exec out", podExec(t, p.kubeconfig, pd, []string{"cat", "/builds/xfer/vendor/blob"}, nil, &got))
	require.EqualValues(t, transferSize, got.n, "bytes out of the bare exec")
	arch := "/cache/warmpod-bench-" + pd.Name + ".zip"
	b.add(role+" helper archive", sh("cd /builds/xfer && gitlab-runner cache-archiver --file "+arch+" --path vendor/ >/dev/null 2>&1"))
	b.add(role+" helper extract", sh("mkdir -p /builds/xfer-x && cd /builds/xfer-x && gitlab-runner cache-extractor --file "+arch+" >/dev/null 2>&1"))
	sh("cmp /builds/xfer-x/vendor/blob /builds/xfer/vendor/blob && rm -rf /builds/xfer /builds/xfer-x " + arch)
	return pd.Name
}

var blobSumRe = regexp.MustCompile(`(?m)^([0-9a-f]{64})  (out|vendor)/blob\s*$`)

// zipEntrySHA256 is the SHA-256 of entry name of the zip archive at path.
func zipEntrySHA256(t *testing.T, path, name string) string {
	t.Helper()
	zr, err := zip.OpenReader(path)
	require.NoError(t, err)
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name == name {
			rc, err := f.Open()
			require.NoError(t, err)
			defer rc.Close()
			h := sha256.New()
			n, err := io.Copy(h, rc)
			require.NoError(t, err)
			require.EqualValues(t, transferSize, n, "%s in %s", name, path)
			return hex.EncodeToString(h.Sum(nil))
		}
	}
	t.Fatalf("%s has no %s", path, name)
	return ""
}

// stageTimes adds, for each named stage of job id, the driver call's wall
// time (key stage) and the stage's own time in the pod (key stage+" in pod").
func stageTimes(t *testing.T, p *glrPool, b transferBench, id int, stages ...string) {
	t.Helper()
	tms := p.timings(t, id)
	for _, st := range stages {
		found := false
		for _, tm := range tms {
			if tm.Call == "run" && tm.Stage == st {
				b.add(st, time.Duration(tm.End-tm.Start))
				b.add(st+" in pod", time.Duration(tm.StageNS))
				found = true
			}
		}
		require.True(t, found, "job %d ran no %s: %v", id, st, stagesOf(tms))
	}
}

func TestGitLabTransferBench(t *testing.T) {
	out := os.Getenv("WARMPOD_KUBE_TRANSFER_BENCH")
	if out == "" {
		t.Skip("WARMPOD_KUBE_TRANSFER_BENCH is not set (make bench-gitlab-transfer sets it)")
	}
	const rounds = 3
	// One pod at a time: the anchor runs in the pod its job is then given.
	p := newPool(t, poolOpts{replicas: 1, flags: []string{"--warm-wait", "0"}})
	payload := make([]byte, transferSize)
	_, _ = rand.Read(payload)
	b := transferBench{}
	for i := range rounds {
		key := "xfer-" + randHex(4)
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(hostCacheDir, "group", "proj", key)) })
		prodID, consID := 3000+2*i, 3001+2*i

		podA := anchorAndHelper(t, p, b, payload, "up")
		prod := p.runJob(t, jobOpts{id: prodID, script: []string{
			`mkdir -p out vendor`,
			fmt.Sprintf(`head -c %d /dev/urandom > out/blob`, transferSize),
			fmt.Sprintf(`head -c %d /dev/urandom > vendor/blob`, transferSize),
			`sha256sum out/blob vendor/blob`,
		}, env: extrasEnv(t, map[string]any{
			"artifacts": []any{map[string]any{"name": "build-out", "paths": []string{"out/"}, "when": "on_success"}},
			"cache":     []any{map[string]any{"key": key, "paths": []string{"vendor/"}, "policy": "push", "when": "on_success"}},
		})})
		require.Equal(t, 0, prod.exit, prod.String())
		tr := traceText(prod.trace)
		_, pod := podOf(t, tr)
		require.Equal(t, podA, pod, "the producer ran in the anchor's pod")
		sums := map[string]string{}
		for _, m := range blobSumRe.FindAllStringSubmatch(tr, -1) {
			sums[m[2]] = m[1]
		}
		require.Len(t, sums, 2, "the producer printed both sums:\n%s", tr)
		stageTimes(t, p, b, prodID, "archive_cache", "upload_artifacts_on_success")
		// The far end has the same bytes: the coordinator's stored
		// artifact and the cache volume's archive.
		require.Equal(t, sums["out"], zipEntrySHA256(t, filepath.Join(prod.runDir, "mock", "artifacts", fmt.Sprint(prodID), "build-out.zip"), "out/blob"))
		require.Equal(t, sums["vendor"], zipEntrySHA256(t, filepath.Join(hostCacheDir, "group", "proj", key, "cache.zip"), "vendor/blob"))

		podB := anchorAndHelper(t, p, b, payload, "down")
		cons := p.runJob(t, jobOpts{id: consID, script: []string{
			`printf '%s  out/blob\n%s  vendor/blob\n' "$WANT_OUT" "$WANT_VENDOR" > /tmp/want.sha256`,
			`sha256sum -c /tmp/want.sha256`,
		}, extraVars: []map[string]any{
			{"key": "WANT_OUT", "value": sums["out"], "public": true},
			{"key": "WANT_VENDOR", "value": sums["vendor"], "public": true},
		}, env: extrasEnv(t, map[string]any{
			"dependencies": []any{map[string]any{"id": prodID}},
			"cache":        []any{map[string]any{"key": key, "paths": []string{"vendor/"}, "policy": "pull", "when": "on_success"}},
		}, fmt.Sprintf("JOB_TOKEN=glcbt-MOCKJOB%d", consID), "ARTIFACTS_FROM="+prod.runDir)})
		require.Equal(t, 0, cons.exit, cons.String())
		tr = traceText(cons.trace)
		_, pod = podOf(t, tr)
		require.Equal(t, podB, pod, "the consumer ran in the anchor's pod")
		require.Contains(t, tr, "out/blob: OK")
		require.Contains(t, tr, "vendor/blob: OK")
		stageTimes(t, p, b, consID, "download_artifacts", "restore_cache")
	}
	waitIdle(t, p.ns, 1, 3*time.Minute)
	report := transferReport(b, rounds)
	t.Log("\n" + report)
	require.NoError(t, os.WriteFile(out, []byte(report), 0o644))
}

// transferReport renders the bench's results as bench/gitlab-transfer-kube.md.
// Each stage is set against the bare exec that moves bytes the same way
// relative to the pod: out of it for the producer's stages, into it for
// the consumer's.
func transferReport(b transferBench, rounds int) string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	var s strings.Builder
	fmt.Fprintf(&s, "| 100 MiB through a warm pod (%d rounds, medians) | wall | MiB/s | bare exec, same pods | MiB/s | ratio | target |\n|---|---|---|---|---|---|---|\n", rounds)
	row := func(what, key, anchor, anchorWhat string) {
		w, a := b.median(key), b.median(anchor)
		ratio := rate(w) / rate(a)
		met := "met"
		if ratio < 0.7 {
			met = "not met"
		}
		fmt.Fprintf(&s, "| %s | %s | %.0f | %s: %s | %.0f | %.2f× | ≥ 0.7×: %s |\n", what, ms(w), rate(w), anchorWhat, ms(a), rate(a), ratio, met)
	}
	row("artifact up: upload_artifacts_on_success (zip, HTTP POST to the coordinator)", "upload_artifacts_on_success", "up exec out", "out of `cat FILE`")
	row("cache up: archive_cache (zip onto the cache volume)", "archive_cache", "up exec out", "out of `cat FILE`")
	row("artifact down: download_artifacts (HTTP GET from the coordinator, unzip)", "download_artifacts", "down exec in", "into `cat > /dev/null && echo ok`")
	row("cache down: restore_cache (unzip from the cache volume)", "restore_cache", "down exec in", "into `cat > /dev/null && echo ok`")
	fmt.Fprintf(&s, "\n| where a stage's time goes (medians) | driver call | in the pod (PID 1's record) | the driver's share | the helper alone, bare exec |\n|---|---|---|---|---|\n")
	for _, st := range []struct{ stage, helper string }{
		{"upload_artifacts_on_success", ""}, {"archive_cache", "up helper archive"},
		{"download_artifacts", ""}, {"restore_cache", "down helper extract"},
	} {
		alone := "—"
		if st.helper != "" {
			alone = ms(b.median(st.helper))
		}
		call, in := b.median(st.stage), b.median(st.stage+" in pod")
		fmt.Fprintf(&s, "| %s | %s | %s | %s | %s |\n", st.stage, ms(call), ms(in), ms(call-in), alone)
	}
	fmt.Fprintf(&s, "\n| bare exec of 100 MiB (medians) | producer's pods | consumer's pods |\n|---|---|---|\n")
	for _, d := range []struct{ key, what string }{
		{"in", "into the pod: `cat > /dev/null && echo ok`"}, {"in counted", "into the pod: `wc -c`, the count checked"}, {"out", "out of the pod: `cat FILE`, the count checked"},
	} {
		fmt.Fprintf(&s, "| %s | %s (%.0f MiB/s) | %s (%.0f MiB/s) |\n", d.what, ms(b.median("up exec "+d.key)), rate(b.median("up exec "+d.key)), ms(b.median("down exec "+d.key)), rate(b.median("down exec "+d.key)))
	}
	fmt.Fprintf(&s, "\nMeasured %s, load average %s. The bare exec (client-go, the driver's exec, a new client each time) moves 100 MiB into `sh -c 'cat > /dev/null && echo ok'` and into `wc -c` (its count checked), and out of `cat FILE` (the count checked), in the pod its job then runs in; `sh -c 'cat > /dev/null'` alone (the shell execs cat) ended about 100 ms into the 100 MiB with exit 0 on this node, so it is not used. Each job's bytes are random and checked by SHA-256 at the far end: the producer's sums against the coordinator's stored artifact and the cache volume's archive, the consumer's script against the producer's sums. The helper alone: `gitlab-runner cache-archiver` and `cache-extractor` of 100 MiB on the cache volume, a bare exec in the same pod.\n",
		time.Now().UTC().Format(time.RFC3339), loadAvg())
	return s.String()
}
