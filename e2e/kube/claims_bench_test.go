//go:build kube

package kubee2e

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/internal/kubeclient"
	"github.com/warmpod/warmpod/poolapi"
)

// Claims at scale (issue 42): bursts of claims, each arriving within
// claimsWindow, against a pool of warm pods on hollow nodes
// (hollow_test.go), through the drivers' own claim path run in this
// process: each claim is one driver process's — its own client and TLS
// connection, under the driver's ServiceAccount (deploy/gitlab-rbac.yaml),
// so API Priority and Fairness treats it as it treats a driver (the admin
// kubeconfig's group is exempt from it) — the pools read from the
// cluster, then pool.Cluster.ClaimWarm. Each size ends with the
// exactly-once check on the API server's final pod list, and the check
// is shown to catch a forced double claim.
//
// Each size is run five ways (claimModes): the claim listing the pool,
// the claim taking the pool controller's offers (package pools/offer,
// warmpod-pools run as a process of its own), the same with the pools
// from a manifest (no pools read), offers with that controller stopped
// (the claims must still all succeed, by listing, as a driver's do when
// the controller is down), and the floor: one pod write per claim and
// nothing else (modeFloor).
//
// In CI: 100 warm pods, bursts of 10 and 100. With
// WARMPOD_CLAIMS_BENCH=FILE (make bench-claims): 1,000 warm pods, bursts
// of 10, 100, 300 and 1,000, and the table goes to FILE.
// WARMPOD_CLAIMS_BURSTS=10,50 sets the sizes, WARMPOD_CLAIMS_MODES the
// ways (their names, separated by semicolons: "list;offers, --pools FILE").
func TestClaimsAtScale(t *testing.T) {
	out := os.Getenv("WARMPOD_CLAIMS_BENCH")
	warm, bursts := 100, []int{10, 100}
	if out != "" {
		warm, bursts = 1000, []int{10, 100, 300, 1000}
	}
	if s := os.Getenv("WARMPOD_CLAIMS_BURSTS"); s != "" {
		// Sizes of one's own (comma-separated), e.g. to look at the knee.
		bursts = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			require.NoError(t, err, "WARMPOD_CLAIMS_BURSTS=%q", s)
			require.LessOrEqual(t, n, warm, "WARMPOD_CLAIMS_BURSTS: a burst of more claims than warm pods")
			bursts = append(bursts, n)
		}
	}
	modes := claimModes
	if s := os.Getenv("WARMPOD_CLAIMS_MODES"); s != "" {
		// Semicolon-separated: the modes' names have commas.
		modes = nil
		for _, m := range strings.Split(s, ";") {
			m = strings.TrimSpace(m)
			require.Contains(t, claimModes, m, "WARMPOD_CLAIMS_MODES=%q: %q is not a mode; want some of %q, separated by ;", s, m, claimModes)
			modes = append(modes, m)
		}
	}
	ns := newNamespace(t, "claims", false)
	ctx := context.Background()
	admin := adminCluster(t, ns)
	rc := rest.CopyConfig(admin.Config)
	rc.QPS, rc.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	// The driver's ServiceAccount and Role, as the GitLab tests apply them.
	outp, err := exec.Command(kubectl, "apply", "-n", ns, "-f", filepath.Join(repoRoot, "deploy/gitlab-rbac.yaml")).CombinedOutput()
	require.NoError(t, err, "%s", outp)
	// Room for the pool and each burst's replacements, on 4 nodes so the
	// scheduler has a choice to make.
	const nodes = 4
	hollow := startHollowNodes(t, cs, ns, nodes, (2*warm)/nodes+50)
	d := pbPoolDeployment(t, "claims", int32(warm), "")
	hollow.place(&d.Spec.Template.Spec)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	require.NoError(t, err)
	k := &pool.Cluster{CS: cs, Config: rc, Namespace: ns}
	settle := waitClaimable(t, k, warm)
	t.Logf("%d warm pods on %d hollow nodes, placed by the scheduler, Ready in %s", warm, nodes, settle.Round(time.Second))

	t.Log("the driver's kubeconfig")
	kc := saKubeconfig(t, ns, "warmpod-gitlab")
	raw, err := json.Marshal(kc)
	require.NoError(t, err)
	sa := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(sa, raw, 0o600))

	offers, stopOffers := startOfferServer(t, ns)
	var rows []claimsRow
	if out != "" {
		// Written even when a burst fails: a failing size is a figure too.
		defer func() { writeClaimsBench(t, out, warm, nodes, rows) }()
	}
	type run struct {
		mode string
		n    int
	}
	var runs []run
	for _, m := range modes {
		for _, n := range bursts {
			runs = append(runs, run{m, n})
		}
	}
	for i, r := range runs {
		n, url := r.n, ""
		var manifest *pool.Set
		switch r.mode {
		case modeOffers:
			url = offers
		case modeFile:
			url = offers
			manifest, err = k.Pools(ctx)
			require.NoError(t, err)
		case modeDown:
			// The controller gone: its port refuses.
			stopOffers()
			url = offers
		}
		var floor []corev1.Pod
		if r.mode == modeFloor {
			// The pods to write, read before the burst: the floor
			// claims do nothing but their one write.
			l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelState + "=" + poolapi.StateIdle})
			require.NoError(t, err)
			for _, p := range l.Items {
				if pool.PodReady(&p) && p.DeletionTimestamp == nil {
					floor = append(floor, p)
				}
			}
			require.GreaterOrEqual(t, len(floor), n, "Ready idle pods for the floor's burst")
		}
		t.Logf("burst of %d, %s", n, r.mode)
		before := scrapeAPIServer(t, cs)
		var results []claimResult
		if r.mode == modeFloor {
			results = floorBurst(ctx, t, sa, ns, floor[:n], claimsWindow)
		} else {
			results = claimBurst(ctx, sa, ns, n, claimsWindow, url, manifest)
		}
		after := scrapeAPIServer(t, cs)
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		problems := claimProblems(results, pods.Items)
		assert.Empty(t, problems, "burst of %d: exactly once", n)
		row := summarize(n, warm, results, after.minus(before))
		row.mode = r.mode
		row.problems = len(problems)
		rows = append(rows, row)
		t.Logf("burst of %d, %s: %s", n, r.mode, row.line())
		t.Logf("burst of %d, %s: the API server's busiest requests meanwhile: %s", n, r.mode, row.server.busiest(8))
		for _, r := range results {
			if !assert.NoError(t, r.err, "claim %s", r.job) || !assert.NotEmpty(t, r.pod, "claim %s got no pod within %s with %d warm pods", r.job, claimWait, warm) {
				break
			}
		}
		switch r.mode {
		case modeOffers, modeFile:
			// Most claims are the offer's write alone; some may list
			// (an offer lost, or not answered within pool.OfferTimeout
			// on a machine this busy).
			assert.GreaterOrEqual(t, row.byOffer, n/2, "burst of %d: claims taken by offer", n)
		case modeDown:
			assert.Equal(t, n, row.offerFailures, "burst of %d: each claim finds the controller down once", n)
			assert.Zero(t, row.byOffer, "burst of %d: claims taken by offer with the controller down", n)
		}
		if i == len(runs)-1 {
			// The check must fail on a double claim: a claimer that
			// writes without the resourceVersion precondition over a pod
			// another job holds.
			forced := claimResult{job: "forced-double"}
			for _, r := range results {
				if r.pod != "" {
					forced.pod = r.pod
					break
				}
			}
			require.NotEmpty(t, forced.pod, "no claim got a pod to claim twice")
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, poolapi.LabelJob, forced.job)
			_, err := cs.CoreV1().Pods(ns).Patch(ctx, forced.pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			require.NoError(t, err)
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			caught := claimProblems(append(results, forced), pods.Items)
			require.NotEmpty(t, caught, "the exactly-once check missed a forced double claim")
			t.Logf("the forced double claim is caught: %s", strings.Join(caught, "; "))
		}
		// The next burst finds a full pool again: the claimed pods go (as
		// at job end), the ReplicaSet has made their replacements.
		zero := int64(0)
		require.NoError(t, cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero},
			metav1.ListOptions{LabelSelector: poolapi.LabelState + "=" + poolapi.StateClaimed}))
		if i < len(runs)-1 {
			waitClaimable(t, k, warm)
		}
	}
}

// The ways a burst claims: the claim lists the pool (no --offers), takes
// the controller's offers, or has --offers set with the controller down.
// modeFile is offers with the pools from a manifest (the drivers'
// --pools FILE), so a claim reads no pools from the API server: the pool
// the test read once stands in for the manifest's.
//
// modeFloor is no claim path at all but the least any claim costs the
// API server: one write of one pod per claim, each to a different idle
// pod read before the burst (no read, no conflict), all on one client and
// one connection under the driver's ServiceAccount, as a long-lived
// process claiming for the drivers would make them. No design whose
// claim writes the pod can do better on the same machine, so it tells
// whether a latency goal is the claim path's to meet or the API
// server's.
const (
	modeList   = "list"
	modeOffers = "offers"
	modeFile   = "offers, --pools FILE"
	modeDown   = "offers, controller down"
	modeFloor  = "floor: one write on one connection"
)

var claimModes = []string{modeList, modeOffers, modeFile, modeDown, modeFloor}

// floorBurst is modeFloor's burst: claim i, arriving at i×window/n,
// writes pods[i] as a claim does (the labels and annotations of
// pool.Cluster's claim, the resourceVersion read as the precondition), on
// one client from kubeconfig sa shared by all of them.
func floorBurst(ctx context.Context, t *testing.T, sa, ns string, pods []corev1.Pod, window time.Duration) []claimResult {
	kc, err := kubeclient.New(sa, ns, "warmpod-pools/claims-floor")
	require.NoError(t, err)
	c := rest.CopyConfig(kc.Config)
	c.QPS, c.Burst = -1, 0 // no client-side limit: the floor is the server's
	var m claimMeter
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &meterRT{m: &m, next: rt} }
	cs, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	res := make([]claimResult, len(pods))
	arrive(len(pods), window, func(i int) {
		r := claimResult{job: fmt.Sprintf("claim-%d", i)}
		began := time.Now()
		l := poolapi.Owner{Job: r.job, Server: "0123456789abcdef"}.Labels()
		l[poolapi.LabelState] = poolapi.StateClaimed
		ann := poolapi.BusyDisruption()
		ann[poolapi.AnnotationClaimedAt] = began.UTC().Format(time.RFC3339Nano)
		ann[poolapi.AnnotationClaimWait] = "0"
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pods[i].ResourceVersion, "labels": l, "annotations": ann}})
		_, r.err = cs.CoreV1().Pods(ns).Patch(ctx, pods[i].Name, types.MergePatchType, b, metav1.PatchOptions{})
		r.total = time.Since(began)
		r.claim = r.total
		if r.err == nil {
			r.pod = pods[i].Name
		}
		res[i] = r
	})
	// The one meter saw every claim's requests: they are counted on the
	// first result, summarize averages them over the burst.
	m.into(&res[0])
	return res
}

// startOfferServer runs the pool controller (warmpod-pools:
// $WARMPOD_POOLS_BIN, else a fresh build) as a process of its own for
// namespace ns, as a replica runs in the cluster (it serves the offers on
// its metrics address, here 127.0.0.1), and waits until its offers'
// cache has synced. It returns the controller's URL and a func that
// stops it (SIGTERM, as a pod's deletion does): the port then refuses,
// as a controller that is down does. The pool has no policy, so the
// controller leaves its size alone.
func startOfferServer(t *testing.T, ns string) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var log bytes.Buffer
	cmd := exec.Command(poolsBinary(t), "--kubeconfig", os.Getenv("KUBECONFIG"), "--namespace", ns,
		"--leader-elect=false", "--metrics-addr", addr)
	cmd.Stdout, cmd.Stderr = &log, &log
	require.NoError(t, cmd.Start())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	url := "http://" + addr
	probe := url + poolapi.OfferPath + "?namespace=" + ns + "&pool=synced-yet&label=" + poolapi.LabelConfig + "&hash=x"
	waitFor(t, time.Minute, "the controller's offers", func() (bool, string) {
		resp, err := http.Get(probe)
		if err != nil {
			return false, err.Error() + "; " + log.String()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent, resp.Status
	})
	return url, stop
}

// poolsBinary is $WARMPOD_POOLS_BIN (make builds it), else a fresh build.
func poolsBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("WARMPOD_POOLS_BIN"); p != "" {
		return p
	}
	bin := filepath.Join(t.TempDir(), "warmpod-pools")
	out, err := exec.Command("go", "build", "-o", bin, filepath.Join(repoRoot, "cmd/warmpod-pools")).CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

// claimsWindow is the span a burst's claims arrive in (the 10 s),
// one every claimsWindow/n. claimWait is each claim's warm wait: longer
// than the drivers' default (--warm-wait 1s) so that each claim's whole
// latency is measured; the table says how many took longer than 1 s. It
// does not say how many a driver with the default would have lost to a
// cold pod: a claim's first pass over the pool is not cut short by the
// warm wait, and the client and the pools read come before it.
const (
	claimsWindow = 10 * time.Second
	claimWait    = 60 * time.Second
)

// waitClaimable waits until the pool's ReplicaSet is current and n of its
// pods are Ready and idle; it returns how long that took.
func waitClaimable(t *testing.T, k *pool.Cluster, n int) time.Duration {
	t.Helper()
	return waitFor(t, 10*time.Minute, fmt.Sprintf("%d Ready idle pods of the pool", n), func() (bool, string) {
		ctx := context.Background()
		set, err := k.Pools(ctx)
		if err != nil || len(set.Pools) != 1 || set.Pools[0].Pending {
			return false, fmt.Sprint("pools: ", err)
		}
		p := set.Pools[0]
		sel := poolapi.LabelPool + "=" + p.Name + "," + poolapi.LabelState + "=" + poolapi.StateIdle
		l, err := k.CS.CoreV1().Pods(k.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err.Error()
		}
		ready := 0
		for i := range l.Items {
			if pool.PodReady(&l.Items[i]) && l.Items[i].DeletionTimestamp == nil {
				ready++
			}
		}
		return ready >= n, fmt.Sprintf("%d of %d Ready", ready, len(l.Items))
	})
}

// claimResult is one claim of a burst, as its driver saw it.
type claimResult struct {
	job, pod string
	err      error
	// total is from the claim's arrival to its end; pools the read of the
	// pools (its first request, with the TLS handshake); claim the
	// ClaimWarm call.
	total, pools, claim time.Duration
	// Requests by verb, and the answers 409 (a conflict: another claim
	// won the pod) and 429 (throttled); offers asked of the controller,
	// and those that failed (then the claim listed).
	lists, patches, gets, requests, conflicts, throttled int
	offers, offerFailures                                int
}

// claimBurst runs n claims, claim i arriving at i×window/n, each on its
// own client and TLS connection from kubeconfig sa, asking the offers of
// the controller at offers when set, and returns their results.
func claimBurst(ctx context.Context, sa, ns string, n int, window time.Duration, offers string, manifest *pool.Set) []claimResult {
	res := make([]claimResult, n)
	arrive(n, window, func(i int) {
		res[i] = claimOnce(ctx, sa, ns, fmt.Sprintf("claim-%d", i), offers, manifest)
	})
	return res
}

// arrive runs claim(i) for i in [0, n), each on a goroutine of its own
// at i×window/n from now, and returns when all have returned.
func arrive(n int, window time.Duration, claim func(i int)) {
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			time.Sleep(time.Until(t0.Add(time.Duration(i) * window / time.Duration(n))))
			claim(i)
		})
	}
	wg.Wait()
}

// claimOnce is one driver's claim: its client as the driver makes it
// (internal/kubeclient from the kubeconfig file sa), on a transport of
// its own, hence its own TLS connection, as each driver process has (the
// Dial function keeps client-go from sharing its cached transport
// between the claims), the pools read from the cluster, the pool of the
// job's image chosen, and a warm claim, taking the offers of the
// controller at offers when set (--offers), on an HTTP connection of its
// own.
func claimOnce(ctx context.Context, sa, ns, job, offers string, manifest *pool.Set) (r claimResult) {
	r.job = job
	began := time.Now()
	defer func() { r.total = time.Since(began) }()
	kc, err := kubeclient.New(sa, ns, "warmpod-gitlab/claims-bench")
	if err != nil {
		r.err = err
		return r
	}
	c := rest.CopyConfig(kc.Config)
	c.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	var m claimMeter
	c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &meterRT{m: &m, next: rt} }
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		r.err = err
		return r
	}
	// The driver's process ends after its claim, and its connection with
	// it: close this one, through client-go's wrappers.
	defer utilnet.CloseIdleConnectionsFor(hc.Transport)
	cs, err := kubernetes.NewForConfigAndClient(c, hc)
	if err != nil {
		r.err = err
		return r
	}
	k := &pool.Cluster{CS: cs, Config: c, Namespace: ns}
	defer m.into(&r)
	if offers != "" {
		oc, err := pool.NewOfferClient(offers)
		if err != nil {
			r.err = err
			return r
		}
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		oc.HTTP = &http.Client{Transport: &meterRT{m: &m, next: tr, offers: true}}
		k.Offers = oc
		k.OfferFailed = func(error) { m.offerFailures.Add(1) }
	}
	t := time.Now()
	set, err := manifest, error(nil)
	if set == nil {
		set, err = k.Pools(ctx)
	}
	r.pools = time.Since(t)
	if err != nil {
		r.err = err
		return r
	}
	if len(set.Pools) == 0 {
		r.err = fmt.Errorf("no pool in namespace %s", ns)
		return r
	}
	p, warm := set.ForImage(set.Pools[0].Image)
	if !warm {
		r.err = fmt.Errorf("no warm pool for image %s", set.Pools[0].Image)
		return r
	}
	t = time.Now()
	pod, err := k.ClaimWarm(ctx, p, poolapi.Owner{Job: job, Server: "0123456789abcdef"}, claimWait, nil)
	r.claim = time.Since(t)
	if err != nil {
		r.err = err
	} else if pod != nil {
		r.pod = pod.Name
	}
	return r
}

// claimMeter counts one claim's requests (its RoundTripper sees each).
type claimMeter struct {
	lists, patches, gets, requests, conflicts, throttled atomic.Int64
	offers, offerFailures                                atomic.Int64
}

func (m *claimMeter) into(r *claimResult) {
	r.lists, r.patches, r.gets = int(m.lists.Load()), int(m.patches.Load()), int(m.gets.Load())
	r.requests, r.conflicts, r.throttled = int(m.requests.Load()), int(m.conflicts.Load()), int(m.throttled.Load())
	r.offers, r.offerFailures = int(m.offers.Load()), int(m.offerFailures.Load())
}

type meterRT struct {
	m    *claimMeter
	next http.RoundTripper
	// offers: this is the transport to the controller's offers, not to
	// the API server.
	offers bool
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the
// transport.
func (t *meterRT) WrappedRoundTripper() http.RoundTripper { return t.next }

func (t *meterRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.offers {
		t.m.offers.Add(1)
		return t.next.RoundTrip(req)
	}
	t.m.requests.Add(1)
	switch {
	case req.Method == http.MethodPatch:
		t.m.patches.Add(1)
	case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods"):
		t.m.lists.Add(1)
	case req.Method == http.MethodGet:
		t.m.gets.Add(1)
	}
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		switch resp.StatusCode {
		case http.StatusConflict:
			t.m.conflicts.Add(1)
		case http.StatusTooManyRequests:
			t.m.throttled.Add(1)
		}
	}
	return resp, err
}

// claimProblems is the exactly-once check of a burst, judged from the API
// server's final list of the namespace's pods: no pod claimed by two
// claims, each claim's pod labelled claimed for its job, and no pod
// claimed for a job whose claim did not get it (a claim lost: its write
// landed, its driver went cold or failed). Empty: exactly once.
func claimProblems(results []claimResult, pods []corev1.Pod) []string {
	var out []string
	byName := map[string]*corev1.Pod{}
	for i := range pods {
		byName[pods[i].Name] = &pods[i]
	}
	holder := map[string]string{}
	got := map[string]string{} // job → pod
	for _, r := range results {
		if r.pod == "" {
			continue
		}
		got[r.job] = r.pod
		if h, dup := holder[r.pod]; dup {
			out = append(out, fmt.Sprintf("pod %s claimed by both %s and %s", r.pod, h, r.job))
			continue
		}
		holder[r.pod] = r.job
		p := byName[r.pod]
		switch {
		case p == nil:
			out = append(out, fmt.Sprintf("pod %s of claim %s is gone", r.pod, r.job))
		case p.Labels[poolapi.LabelState] != poolapi.StateClaimed:
			out = append(out, fmt.Sprintf("pod %s of claim %s is %q", r.pod, r.job, p.Labels[poolapi.LabelState]))
		case p.Labels[poolapi.LabelJob] != r.job:
			out = append(out, fmt.Sprintf("pod %s of claim %s is labelled for job %s", r.pod, r.job, p.Labels[poolapi.LabelJob]))
		}
	}
	for _, p := range pods {
		j := p.Labels[poolapi.LabelJob]
		if p.Labels[poolapi.LabelState] == poolapi.StateClaimed && got[j] != p.Name {
			out = append(out, fmt.Sprintf("pod %s is claimed for job %s, whose claim got %q", p.Name, j, got[j]))
		}
	}
	slices.Sort(out)
	return out
}

// apiServerSample is what a scrape of the API server's /metrics says of
// where a claim's time goes: the time spent serving pod LISTs and
// PATCHes, and requests' waits in API Priority and Fairness' queues of
// the drivers' priority level (workload-low: the service-accounts flow
// schema), as running sums and counts.
type apiServerSample struct {
	listSum, patchSum, waitSum       float64
	listCount, patchCount, waitCount float64
	// requests counts the API server's requests by "VERB resource[/sub]"
	// (apiserver_request_total): whose work a burst is, the claims' own
	// or the follow-on writes of others.
	requests map[string]float64
}

func (a apiServerSample) minus(b apiServerSample) apiServerSample {
	d := apiServerSample{a.listSum - b.listSum, a.patchSum - b.patchSum, a.waitSum - b.waitSum,
		a.listCount - b.listCount, a.patchCount - b.patchCount, a.waitCount - b.waitCount, map[string]float64{}}
	for k, v := range a.requests {
		if n := v - b.requests[k]; n > 0 {
			d.requests[k] = n
		}
	}
	return d
}

// busiest is the n kinds of request the API server served most of in s,
// with their counts, most first ("PATCH pods 1000, POST events 990, …").
func (a apiServerSample) busiest(n int) string {
	type kv struct {
		k string
		v float64
	}
	var all []kv
	for k, v := range a.requests {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(x, y kv) int {
		if x.v != y.v {
			return cmp.Compare(y.v, x.v)
		}
		return strings.Compare(x.k, y.k)
	})
	var out []string
	for i := 0; i < len(all) && i < n; i++ {
		out = append(out, fmt.Sprintf("%s %.0f", all[i].k, all[i].v))
	}
	return strings.Join(out, ", ")
}

func scrapeAPIServer(t *testing.T, cs kubernetes.Interface) apiServerSample {
	t.Helper()
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	s := apiServerSample{requests: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		name, rest, ok := strings.Cut(l, "{")
		if !ok {
			continue
		}
		labels, val, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		has := func(kv string) bool { return strings.Contains(","+labels+",", ","+kv+",") }
		if name == "apiserver_request_total" {
			label := func(k string) string {
				_, rest, ok := strings.Cut(","+labels, ","+k+`="`)
				if !ok {
					return ""
				}
				v, _, _ := strings.Cut(rest, `"`)
				return v
			}
			if r := label("resource"); r != "" && label("verb") != "WATCH" {
				if sub := label("subresource"); sub != "" {
					r += "/" + sub
				}
				s.requests[label("verb")+" "+r] += v
			}
			continue
		}
		pods := has(`resource="pods"`) && has(`subresource=""`)
		switch {
		case name == "apiserver_request_duration_seconds_sum" && pods && has(`verb="LIST"`):
			s.listSum += v
		case name == "apiserver_request_duration_seconds_count" && pods && has(`verb="LIST"`):
			s.listCount += v
		case name == "apiserver_request_duration_seconds_sum" && pods && has(`verb="PATCH"`):
			s.patchSum += v
		case name == "apiserver_request_duration_seconds_count" && pods && has(`verb="PATCH"`):
			s.patchCount += v
		case name == "apiserver_flowcontrol_request_wait_duration_seconds_sum" && has(`priority_level="workload-low"`):
			s.waitSum += v
		case name == "apiserver_flowcontrol_request_wait_duration_seconds_count" && has(`priority_level="workload-low"`):
			s.waitCount += v
		}
	}
	return s
}

// claimsRow is one burst's line of bench/claims.md.
type claimsRow struct {
	mode                                         string
	offersPerClaim                               float64
	offerFailures, byOffer                       int
	n, warm, claimed, problems, overOneSecond    int
	p50, p99, max, poolsP50, claimP50, claimP99  time.Duration
	reqsPerClaim, listsPerClaim, patchesPerClaim float64
	conflicts, throttled                         int
	server                                       apiServerSample
	listMean, patchMean, waitMean                time.Duration
}

func summarize(n, warm int, rs []claimResult, server apiServerSample) claimsRow {
	row := claimsRow{n: n, warm: warm, server: server}
	var total, pools, claim []time.Duration
	for _, r := range rs {
		if r.pod != "" {
			row.claimed++
		}
		if r.total > time.Second {
			row.overOneSecond++
		}
		total, pools, claim = append(total, r.total), append(pools, r.pools), append(claim, r.claim)
		row.reqsPerClaim += float64(r.requests)
		row.listsPerClaim += float64(r.lists)
		row.patchesPerClaim += float64(r.patches)
		row.conflicts += r.conflicts
		row.throttled += r.throttled
		row.offersPerClaim += float64(r.offers)
		row.offerFailures += r.offerFailures
		if r.pod != "" && r.offers > 0 && r.lists == 0 {
			row.byOffer++
		}
	}
	row.offersPerClaim /= float64(n)
	row.reqsPerClaim /= float64(n)
	row.listsPerClaim /= float64(n)
	row.patchesPerClaim /= float64(n)
	row.p50, row.p99, row.max = pbPercentile(total, 0.5), pbPercentile(total, 0.99), pbPercentile(total, 1)
	row.poolsP50, row.claimP50, row.claimP99 = pbPercentile(pools, 0.5), pbPercentile(claim, 0.5), pbPercentile(claim, 0.99)
	mean := func(sum, count float64) time.Duration {
		if count == 0 {
			return 0
		}
		return time.Duration(sum / count * float64(time.Second))
	}
	row.listMean, row.patchMean, row.waitMean = mean(server.listSum, server.listCount), mean(server.patchSum, server.patchCount), mean(server.waitSum, server.waitCount)
	return row
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 0, 64)
}

func (r claimsRow) line() string {
	return fmt.Sprintf("%d by offer, %.2f offers per claim (%d failed), ", r.byOffer, r.offersPerClaim, r.offerFailures) + fmt.Sprintf("%d/%d claimed, latency p50 %s ms p99 %s ms max %s ms (pools read p50 %s ms, claim p50 %s ms p99 %s ms), %.1f requests per claim (%.1f lists, %.2f patches), %d conflicts, %d throttled, %d took > 1 s; API server: pod LIST %s ms mean, PATCH %s ms mean, APF wait %s ms mean; exactly-once problems %d",
		r.claimed, r.n, ms(r.p50), ms(r.p99), ms(r.max), ms(r.poolsP50), ms(r.claimP50), ms(r.claimP99), r.reqsPerClaim, r.listsPerClaim, r.patchesPerClaim,
		r.conflicts, r.throttled, r.overOneSecond, ms(r.listMean), ms(r.patchMean), ms(r.waitMean), r.problems)
}

// writeClaimsBench appends the run's table to file.
func writeClaimsBench(t *testing.T, file string, warm, nodes int, rows []claimsRow) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Run of %s\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "%s\n\n", machineLine(t))
	fmt.Fprintf(&b, "%d warm pods of one pool on %d hollow nodes (placed by kube-scheduler); each burst's claims arrive one every %s/n; each claim is a driver's: its own client and TLS connection, the driver's ServiceAccount, the pools read (none with `--pools FILE`), then `ClaimWarm`, listing the pool or taking the offers of the pool controller (`warmpod-pools`, a process of its own on this machine); \"controller down\": that process stopped; \"floor\": no claim path, one patch per claim of a pod read before the burst, on one client and connection shared by the burst.\n\n", warm, nodes, claimsWindow)
	b.WriteString("| claim | claims in 10 s | claimed | p50 ms | p99 ms | max ms | pools read p50 ms | claim p50 / p99 ms | requests per claim (lists, patches) | offers per claim (failed) | conflicts | took > 1 s | API server: pod LIST / PATCH mean ms | APF wait mean ms | exactly once |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---|\n")
	for _, r := range rows {
		once := "yes"
		if r.problems > 0 {
			once = fmt.Sprintf("**no (%d)**", r.problems)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s / %s | %.1f (%.1f, %.2f) | %.2f (%d) | %d | %d | %s / %s | %s | %s |\n",
			r.mode, r.n, r.claimed, ms(r.p50), ms(r.p99), ms(r.max), ms(r.poolsP50), ms(r.claimP50), ms(r.claimP99),
			r.reqsPerClaim, r.listsPerClaim, r.patchesPerClaim, r.offersPerClaim, r.offerFailures, r.conflicts, r.overOneSecond, ms(r.listMean), ms(r.patchMean), ms(r.waitMean), once)
	}
	b.WriteString("\nThe API server's busiest requests during each burst (`apiserver_request_total`, WATCH left out):\n\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "- %s, %d: %s\n", r.mode, r.n, r.server.busiest(8))
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteString(b.String())
	require.NoError(t, err)
}
