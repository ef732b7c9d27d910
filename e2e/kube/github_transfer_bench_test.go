//go:build kube

package kubee2e

// The _work transfer of make bench-github: where prepare_job's time goes
// with a 200 MiB workspace (the hook's "_work timings" debug line), and
// the anchor it is measured against, a bare exec of client-go that pipes
// as many bytes into a pool pod, run after each warmpod run of the same
// job: into `sha256sum` (the digest checked: the same bytes verified at
// the far end, as the hook does) on one exec stream and on as many as the
// hook used, and over SPDY; into `wc -c` (the count checked: bytes read
// and dropped). Not `cat > /dev/null`: the job image's BusyBox cat exits
// 0 without reading its input when stdout is /dev/null (the client's
// stdin copy then fails with a connection reset), so its time is not
// that of the bytes.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// benchRuns is how many runs of pass.json and of bigfile.json the bench
// makes: n and nBig, or WARMPOD_GITHUB_BENCH_RUNS="N,NBIG" (a quicker
// look at one setting; the committed figures are the defaults').
func benchRuns(t *testing.T, n, nBig int) (int, int) {
	v := os.Getenv("WARMPOD_GITHUB_BENCH_RUNS")
	if v == "" {
		return n, nBig
	}
	a, b, ok := strings.Cut(v, ",")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	require.True(t, ok && err1 == nil && err2 == nil && x >= 0 && y >= 0, "WARMPOD_GITHUB_BENCH_RUNS=%q: want N,NBIG", v)
	return x, y
}

// transferFigures are the big runs' transfer timings and the bare exec
// anchors' times, by number of streams.
type transferFigures struct {
	runs    []map[string]float64
	bytes   int64
	streams int
	bare    map[string][]time.Duration // by "N stream(s), protocol"
	data    []byte
}

// add reads the "_work timings" line of a warmpod run of bigfile.json.
func (f *transferFigures) add(t *testing.T, r *hookResult, i int, log string) {
	t.Helper()
	if r.Result != r.Expect {
		t.Logf("warmpod bigfile run %d: %s\n%s", i, r.Result, log)
		return
	}
	for _, st := range r.Steps {
		for _, o := range st.Output {
			_, line, ok := strings.Cut(o.Text, "_work timings: ")
			if !ok {
				continue
			}
			m := map[string]float64{}
			for _, kv := range strings.Fields(line) {
				k, v, _ := strings.Cut(kv, "=")
				x, err := strconv.ParseFloat(v, 64)
				require.NoError(t, err, "%q", line)
				m[k] = x
			}
			f.runs = append(f.runs, m)
			f.bytes, f.streams = int64(m["bytes"]), max(1, int(m["streams"]))
			return
		}
	}
	t.Fatalf("warmpod bigfile run %d: no _work timings line:\n%s", i, log)
}

// bareExec pipes f.bytes random bytes (as many as the hook's archive)
// into cmd ("sha256sum" or "wc -c") in an idle pool pod's job container
// with client-go's exec (a new client, as the hook makes), split over
// streams execs run at once, and checks what cmd printed (the part's
// digest or size); it records the wall time from the first exec's start
// to the last one's end. spdy: the exec over SPDY (the API server passes
// its bytes through to the kubelet) instead of the WebSocket the hook
// uses (which the API server translates to SPDY for the kubelet).
func (f *transferFigures) bareExec(t *testing.T, g *ghPool, cmd string, streams int, spdy bool) {
	t.Helper()
	if f.bytes == 0 {
		return
	}
	if int64(len(f.data)) != f.bytes {
		f.data = make([]byte, f.bytes)
		rng := rand.NewChaCha8([32]byte{1})
		_, _ = rng.Read(f.data)
	}
	pods := waitIdle(t, g.ns, 3, 2*time.Minute)
	rc, err := clientcmd.BuildConfigFromFlags("", g.kubeconfig)
	require.NoError(t, err)
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	k := &pool.Cluster{CS: cs, Config: rc, Namespace: g.ns}
	target := poolapi.Pod{Name: pods[0].Metadata.Name, Namespace: g.ns, Container: "job"}
	part := (f.bytes + int64(streams) - 1) / int64(streams)
	var wg sync.WaitGroup
	errs := make([]error, streams)
	t0 := time.Now()
	for i := range streams {
		lo, hi := min(int64(i)*part, f.bytes), min(int64(i+1)*part, f.bytes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out, errb bytes.Buffer
			argv, in := []string{"sh", "-c", cmd}, bytes.NewReader(f.data[lo:hi])
			code, err := 0, error(nil)
			if spdy {
				err = spdyExec(rc, cs, target, argv, in, &out, &errb)
			} else {
				code, err = k.Exec(context.Background(), target, argv, in, &out, &errb)
			}
			want := strconv.FormatInt(hi-lo, 10)
			if cmd == "sha256sum" {
				sum := sha256.Sum256(f.data[lo:hi])
				want = hex.EncodeToString(sum[:])
			}
			switch got, _, _ := strings.Cut(strings.TrimSpace(out.String()), " "); {
			case err == nil && code != 0:
				err = fmt.Errorf("exit %d: %s", code, errb.String())
			case err == nil && got != want:
				err = fmt.Errorf("%s printed %q, want %q: not the bytes sent", cmd, got, want)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	for _, err := range errs {
		require.NoError(t, err, "bare exec %s", cmd)
	}
	if f.bare == nil {
		f.bare = map[string][]time.Duration{}
	}
	key := fmt.Sprintf("`%s`, %d stream(s) at once, WebSocket", cmd, streams)
	if spdy {
		key = fmt.Sprintf("`%s`, %d stream(s) at once, SPDY", cmd, streams)
	}
	f.bare[key] = append(f.bare[key], d)
}

// spdyExec runs argv in target over SPDY alone.
func spdyExec(rc *rest.Config, cs kubernetes.Interface, target poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(target.Namespace).Name(target.Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{Container: target.Container, Command: argv, Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(rc, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	return ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}

// med is the median of key over the runs.
func (f *transferFigures) med(key string) float64 {
	var v []float64
	for _, m := range f.runs {
		if x, ok := m[key]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return -1
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// write adds the breakdown and the MB/s against the bare exec anchor.
func (f *transferFigures) write(b *strings.Builder, wpPrepare, upPrepare []time.Duration, rtt time.Duration) {
	if len(f.runs) == 0 {
		b.WriteString("\nNo successful warmpod run of bigfile.json: no transfer figures.\n")
		return
	}
	mb := func(d time.Duration) string {
		if d <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.0f MB/s", float64(f.bytes)/d.Seconds()/1e6)
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	wall, prep := ms(f.med("wall_ms")), medianOf(wpPrepare)
	fmt.Fprintf(b, "\n### prepare_job with a 200 MiB workspace: where the time goes\n\n")
	fmt.Fprintf(b, "The hook's `_work timings` debug line, medians of %d runs; the archive is %d bytes in %.0f pieces, %d at once (`--streams`). The archive's writer and the sends overlap: the rows are busy times, not a sum.\n\n",
		len(f.runs), f.bytes, f.med("pieces"), f.streams)
	b.WriteString("| phase | ms |\n|---|---:|\n")
	for _, r := range []struct{ what, key string }{
		{"the archive: walk, read, tar (into memory; before 018eebe, into a temp file)", "collect_ms"},
		{"SHA-256 of the pieces (as they are written; before 018eebe, a second read of the temp file)", "hash_ms"},
		{"the archive's writer waiting for the sends (all pieces in memory in use)", "wait_ms"},
		{"puts of all pieces but the last, summed (each an exec: upgrade, transfer, the pod's check, write, fsync)", "put_ms"},
		{"… from the first put's start to the last one's end", "put_wall_ms"},
		{"the last piece's exec, with the unpack", "last_ms"},
		{"… of which the unpack in the pod (`cat pieces | tar -x`, as the pod timed it)", "extract_ms"},
		{"the transfer, whole (sendWork)", "wall_ms"},
	} {
		fmt.Fprintf(b, "| %s | %s |\n", r.what, msStr(ms(f.med(r.key))))
	}
	fmt.Fprintf(b, "| prepare_job, whole (hookrun) | %s |\n| … the rest: pool pick, claim, job start | %s |\n", msStr(prep), msStr(prep-wall))
	fmt.Fprintf(b, "\nOne exec's round trip (`true`, above): %s, so the exec upgrades of %.0f pieces over %d streams are about %s of the transfer.\n",
		msStr(rtt), f.med("pieces"), f.streams, msStr(time.Duration(f.med("pieces")/float64(f.streams)*float64(rtt))))
	b.WriteString("\n| the same bytes into the pod | time | MB/s | warmpod's transfer / it |\n|---|---:|---:|---:|\n")
	fmt.Fprintf(b, "| warmpod-github, the transfer (sendWork: archive, hash, puts, unpack) | %s | %s | |\n", msStr(wall), mb(wall))
	fmt.Fprintf(b, "| warmpod-github, prepare_job whole | %s | %s | |\n", msStr(prep), mb(prep))
	for _, k := range sortedKeys(f.bare) {
		d := median(f.bare[k])
		fmt.Fprintf(b, "| bare client-go exec into %s (%d runs) | %s | %s | %.2f× |\n", k, len(f.bare[k]), msStr(d), mb(d), float64(wall)/float64(d))
	}
	if len(f.data) > 0 {
		// Compression pays only when it is faster than the link and the
		// bytes shrink: gzip's fastest level on the anchor's bytes (random,
		// as bigfile.json's) on this machine, one core.
		var n countingWriter
		t0 := time.Now()
		zw, _ := gzip.NewWriterLevel(&n, gzip.BestSpeed)
		_, _ = zw.Write(f.data)
		_ = zw.Close()
		d := time.Since(t0)
		fmt.Fprintf(b, "| gzip -1 of the same bytes, here, no transfer (compress/gzip, one core; out/in %.3f) | %s | %s | |\n", float64(n)/float64(len(f.data)), msStr(d), mb(d))
	}
	if up := medianOf(upPrepare); up > 0 {
		fmt.Fprintf(b, "| upstream k8s-novolume hook, prepare_job whole | %s | %s | |\n", msStr(up), mb(up))
		ratio := float64(prep) / float64(up)
		fmt.Fprintf(b, "\nTarget ≤ 0.40× upstream's prepare_job with this workspace: %.3f× (%s).\n", ratio, map[bool]string{true: "met", false: "**not met**"}[ratio <= 0.4])
	}
}

// countingWriter counts what is written to it.
type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}

func sortedKeys(m map[string][]time.Duration) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}
