package pools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/warmpod/warmpod/sizing"
)

// Recent counts a pool's warm claims and cold starts of the last hour and
// day by when the job got its pod, each once its wait is known (a cold
// pod's when it is Ready), with the waits' median and 95th percentile.
func TestTrackerRecent(t *testing.T) {
	tr := NewTracker()
	tr.Began(t0.Add(-48 * time.Hour))
	// The last hour: 18 warm claims waiting 10…180 ms, one cold start of
	// 8.5 s (1.5 s looking, 7 s starting), one cold pod still starting.
	for i := range 18 {
		tr.Observe(warmClaim(fmt.Sprintf("w%d", i), t0.Add(-time.Duration(i+1)*time.Minute), 10*(i+1)).build(), t0)
	}
	tr.Observe(coldPod("c1", "no-idle", t0.Add(-30*time.Minute), 1500, true, 7*time.Second).build(), t0)
	tr.Observe(coldPod("c2", "no-idle", t0.Add(-time.Minute), 0, false, 0).build(), t0)
	// Earlier in the day: 4 warm claims and a cold start of 20 s; two days
	// ago: one warm claim, out of both windows.
	for i := range 4 {
		tr.Observe(warmClaim(fmt.Sprintf("d%d", i), t0.Add(-time.Duration(2+i)*time.Hour), 50).build(), t0)
	}
	tr.Observe(coldPod("c3", "pending", t0.Add(-5*time.Hour), 0, true, 20*time.Second).build(), t0)
	tr.Observe(warmClaim("old", t0.Add(-47*time.Hour), 5).build(), t0)
	// A pool of another namespace is not this controller's.
	other := warmClaim("x", t0.Add(-time.Minute), 5).build()
	other.Namespace = "elsewhere"
	tr.Observe(other, t0)

	got := tr.Recent(ns, t0)
	require.Len(t, got, 1)
	r := got[0]
	assert.Equal(t, "alpine", r.Pool)
	assert.Equal(t, ClaimWindow{Warm: 18, Cold: 1, WaitP50Secs: 0.1, WaitP95Secs: 8.5}, r.Hour)
	// 24 waits: the 12th is 80 ms, the 23rd 8.5 s (the 24th, 20 s, is the slowest).
	assert.Equal(t, ClaimWindow{Warm: 22, Cold: 2, WaitP50Secs: 0.08, WaitP95Secs: 8.5}, r.Day)
	assert.Equal(t, t0.Add(-48*time.Hour), r.Since)

	// Once the c2 pod is Ready, its wait counts.
	tr.Observe(coldPod("c2", "no-idle", t0.Add(-time.Minute), 0, true, 40*time.Second).build(), t0)
	r = tr.Recent(ns, t0)[0]
	assert.Equal(t, 2, r.Hour.Cold)
	assert.Equal(t, 20.0, r.Day.WaitP95Secs, "25 waits now: the 24th is c3's 20 s, the 25th c2's 40 s")

	// What the endpoint serves.
	b, err := json.Marshal(r.Hour)
	require.NoError(t, err)
	assert.JSONEq(t, `{"warm":18,"cold":2,"waitP50Seconds":0.1,"waitP95Seconds":8.5}`, string(b))
}

// A pool with no claim whose wait is known has empty windows; the waits
// kept are bounded (maxWaits) and pruned to the day with its history.
func TestTrackerRecentBounds(t *testing.T) {
	tr := NewTracker()
	tr.Observe(idlePod("quiet", "a", true, t0.Add(-time.Hour)), t0)
	for i := range maxWaits + 5 {
		tr.Observe(warmClaim(fmt.Sprintf("w%d", i), t0.Add(-2*time.Hour+time.Duration(i)*time.Millisecond), 1).build(), t0)
	}
	var alpine, quiet RecentClaims
	for _, r := range tr.Recent(ns, t0) {
		switch r.Pool {
		case "alpine":
			alpine = r
		case "quiet":
			quiet = r
		}
	}
	assert.Equal(t, ClaimWindow{}, quiet.Hour)
	assert.Equal(t, ClaimWindow{}, quiet.Day)
	assert.Equal(t, maxWaits, alpine.Day.Warm)
	tr.Demand(ns+"/alpine", t0.Add(history))
	assert.Equal(t, 0, tr.Recent(ns, t0.Add(history))[0].Day.Warm, "pruned with the claims a day later")
}

// rawResponse is a pod proxy's answer in the fake clientset.
type rawResponse struct {
	body []byte
	err  error
}

func (r rawResponse) DoRaw(context.Context) ([]byte, error) { return r.body, r.err }
func (r rawResponse) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(r.body)), r.err
}

// The leader's claims are read through the API server's pod proxy, or,
// where the proxy is forbidden, from the pod's IP; each failure names its
// step.
func TestFetchRecent(t *testing.T) {
	reply := `{"pools":[{"pool":"alpine","hour":{"warm":3,"cold":1,"waitP50Seconds":0.02,"waitP95Seconds":6},"day":{"warm":30,"cold":2,"waitP50Seconds":0.02,"waitP95Seconds":6},"since":"2026-11-29T09:00:00Z"}]}`
	want := []RecentClaims{{Pool: "alpine", Hour: ClaimWindow{Warm: 3, Cold: 1, WaitP50Secs: 0.02, WaitP95Secs: 6},
		Day: ClaimWindow{Warm: 30, Cold: 2, WaitP50Secs: 0.02, WaitP95Secs: 6}, Since: t0.Add(-24 * time.Hour)}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "warmpod-pools", Namespace: ns},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("warmpod-pools-abc")}}
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != ClaimsPath {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, reply)
	}))
	defer direct.Close()
	host, port, err := net.SplitHostPort(strings.TrimPrefix(direct.URL, "http://"))
	require.NoError(t, err)
	leader := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "warmpod-pools-abc", Namespace: ns}, Status: corev1.PodStatus{PodIP: host}}
	forbidden := apierrors.NewForbidden(corev1.Resource("pods/proxy"), "warmpod-pools-abc", errors.New("no pods/proxy"))

	cases := []struct {
		name    string
		objs    []k8sruntime.Object
		proxy   rawResponse
		want    []RecentClaims
		wantErr string
	}{
		{"through the pod proxy", []k8sruntime.Object{lease}, rawResponse{body: []byte(reply)}, want, ""},
		{"the proxy forbidden: the pod's IP", []k8sruntime.Object{lease, leader}, rawResponse{err: forbidden}, want, ""},
		{"no Lease: no controller", nil, rawResponse{}, nil, "read the controller's Lease " + ns + "/warmpod-pools"},
		{"a Lease without a holder", []k8sruntime.Object{&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "warmpod-pools", Namespace: ns}}},
			rawResponse{}, nil, "has no holder: no controller leads"},
		{"the leader's pod gone", []k8sruntime.Object{lease}, rawResponse{err: forbidden}, nil, "ask the leader, pod warmpod-pools-abc, on port " + port},
		{"not JSON", []k8sruntime.Object{lease}, rawResponse{body: []byte("<html>")}, nil, "answered what is not a ClaimsReply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset(tc.objs...)
			cs.PrependProxyReactor("pods", func(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
				pa := a.(k8stesting.ProxyGetAction)
				assert.Equal(t, "warmpod-pools-abc", pa.GetName())
				assert.Equal(t, port, pa.GetPort())
				assert.Equal(t, ClaimsPath, pa.GetPath())
				return true, tc.proxy, nil
			})
			got, err := FetchRecent(context.Background(), cs, ns, "warmpod-pools", port, direct.Client())
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// ClaimsPath: a follower says it does not lead (503), the leader serves
// its tracker's RecentClaims, and only GET is served.
func TestClaimsHandler(t *testing.T) {
	var c *Controller
	h := ClaimsHandler(func() *Controller { return c })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ClaimsPath, nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Contains(t, rec.Body.String(), "does not lead")

	hr := newHarness(t, t0, sizing.Budget{}, poolDeployment("alpine", "- idle_count: 1", 1))
	hr.c.tracker.Observe(warmClaim("w", t0.Add(-time.Minute), 20).build(), t0)
	c = hr.c
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ClaimsPath, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	var got ClaimsReply
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Len(t, got.Pools, 1)
	assert.Equal(t, ClaimWindow{Warm: 1, WaitP50Secs: 0.02, WaitP95Secs: 0.02}, got.Pools[0].Hour)

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, ClaimsPath, nil))
	assert.Equal(t, http.StatusMethodNotAllowed, rec.Code)
}
