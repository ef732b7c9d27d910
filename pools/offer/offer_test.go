package offer

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)

// idle is an idle pod of pool alpine (config h), Ready since readyAt.
func idle(name string, readyAt time.Time, edit func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci", UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{poolapi.LabelPool: "alpine", poolapi.LabelState: poolapi.StateIdle, poolapi.LabelConfig: "h"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(readyAt)}}},
	}
	if edit != nil {
		edit(p)
	}
	return p
}

func start(t *testing.T, clk *clocktesting.FakeClock, pods ...runtime.Object) (*Server, *fake.Clientset) {
	t.Helper()
	cs := fake.NewClientset(pods...)
	s, err := New(cs, "ci", clk, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, s.Start(ctx))
	return s, cs
}

// Only a claimable pod is offered: idle, Ready, of the pool and its
// configuration, not retiring, not being deleted, not resized by a
// claimer (the catatonit way: the reason beside each case).
func TestOfferOnlyClaimable(t *testing.T) {
	old := t0.Add(-time.Minute)
	now := metav1.NewTime(t0)
	for _, tc := range []struct {
		name string
		edit func(*corev1.Pod)
	}{
		{"not Ready: a claim's job start would wait", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }},
		{"Pending: not running yet", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }},
		{"retiring: the controller is removing it", func(p *corev1.Pod) { p.Annotations = map[string]string{poolapi.AnnotationRetiring: "1"} }},
		{"being deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }},
		{"resized by a claimer: that claim is in flight", func(p *corev1.Pod) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: pool.ResizeFieldManager, Subresource: "resize"}}
		}},
		{"another configuration", func(p *corev1.Pod) { p.Labels[poolapi.LabelConfig] = "other" }},
		{"another pool", func(p *corev1.Pod) { p.Labels[poolapi.LabelPool] = "golang" }},
		{"claimed", func(p *corev1.Pod) { p.Labels[poolapi.LabelState] = poolapi.StateClaimed }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(t0)
			s, _ := start(t, clk, idle("x", old, tc.edit))
			_, ok := s.Offer("alpine", poolapi.LabelConfig, "h")
			assert.False(t, ok)
		})
	}
	t.Run("a claimable one, with managedFields of others", func(t *testing.T) {
		s, _ := start(t, clocktesting.NewFakeClock(t0), idle("x", old, func(p *corev1.Pod) {
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Subresource: "status"}, {Manager: pool.ResizeFieldManager}}
		}))
		o, ok := s.Offer("alpine", poolapi.LabelConfig, "h")
		require.True(t, ok)
		assert.Equal(t, poolapi.Offer{Name: "x", UID: "uid-x"}, o)
	})
}

// An offered pod is held for Hold: the next claims get the others, then
// none; after Hold it is offered again. A pod Ready for long enough that a
// resize applies at once goes before one just Ready.
func TestOfferHoldsAndPrefersSettled(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	// fresh turns Ready at the end of the hold: not settled at any time
	// of this test.
	s, _ := start(t, clk, idle("fresh", t0.Add(Hold), nil), idle("settled", t0.Add(-time.Minute), nil))
	o, ok := s.Offer("alpine", poolapi.LabelConfig, "h")
	require.True(t, ok)
	assert.Equal(t, "settled", o.Name)
	o, ok = s.Offer("alpine", poolapi.LabelConfig, "h")
	require.True(t, ok)
	assert.Equal(t, "fresh", o.Name)
	_, ok = s.Offer("alpine", poolapi.LabelConfig, "h")
	assert.False(t, ok, "both held")
	clk.Step(Hold - time.Millisecond)
	_, ok = s.Offer("alpine", poolapi.LabelConfig, "h")
	assert.False(t, ok, "still held")
	clk.Step(time.Millisecond)
	o, ok = s.Offer("alpine", poolapi.LabelConfig, "h")
	require.True(t, ok)
	assert.Equal(t, "settled", o.Name)
}

// The HTTP answers: the codes poolapi.OfferPath documents, each counted.
func TestServeHTTP(t *testing.T) {
	q := func(kv ...string) string {
		v := url.Values{poolapi.OfferNamespace: {"ci"}, poolapi.OfferPool: {"alpine"}, poolapi.OfferLabel: {poolapi.LabelConfig}, poolapi.OfferHash: {"h"}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return poolapi.OfferPath + "?" + v.Encode()
	}
	s, _ := start(t, clocktesting.NewFakeClock(t0), idle("a", t0.Add(-time.Minute), nil))
	for _, tc := range []struct {
		name, method, target string
		code                 int
	}{
		{"offer", http.MethodGet, q(), http.StatusOK},
		{"none left (a is held)", http.MethodGet, q(), http.StatusNoContent},
		{"POST", http.MethodPost, q(), http.StatusMethodNotAllowed},
		{"another namespace", http.MethodGet, q(poolapi.OfferNamespace, "prod"), http.StatusNotFound},
		{"no namespace", http.MethodGet, q(poolapi.OfferNamespace, ""), http.StatusNotFound},
		{"a label not of the contract", http.MethodGet, q(poolapi.OfferLabel, "app"), http.StatusBadRequest},
		{"no pool", http.MethodGet, q(poolapi.OfferPool, ""), http.StatusBadRequest},
		{"a pool that is no label value", http.MethodGet, q(poolapi.OfferPool, "a b/c"), http.StatusBadRequest},
		{"a hash that is no label value", http.MethodGet, q(poolapi.OfferHash, string(make([]byte, 64))), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(tc.method, tc.target, nil))
			assert.Equal(t, tc.code, w.Code, w.Body.String())
			if tc.code == http.StatusOK {
				var o poolapi.Offer
				require.NoError(t, json.Unmarshal(w.Body.Bytes(), &o))
				assert.Equal(t, "a", o.Name)
			}
		})
	}
	assert.Equal(t, 1.0, counter(t, s, ResultOffered))
	assert.Equal(t, 1.0, counter(t, s, ResultNone))
	assert.Equal(t, 7.0, counter(t, s, ResultRefused))
}

// Before its cache has synced the server offers nothing: 503, so the
// driver lists.
func TestServeHTTPBeforeSync(t *testing.T) {
	s, err := New(fake.NewClientset(), "ci", clocktesting.NewFakeClock(t0), nil)
	require.NoError(t, err)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, poolapi.OfferPath+"?namespace=ci&pool=alpine&label=warmpod.dev%2Fconfig&hash=h", nil))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
}

// The driver's claim through a real offer server and HTTP: the offered
// pod claimed with one patch and no list; with the server gone, the claim
// lists and still gets a pod.
func TestClaimThroughOffers(t *testing.T) {
	s, cs := start(t, clocktesting.NewFakeClock(t0), idle("a", t0.Add(-time.Minute), nil), idle("b", t0.Add(-time.Minute), nil))
	mux := http.NewServeMux()
	mux.Handle(poolapi.OfferPath, s)
	srv := httptest.NewServer(mux)
	oc, err := pool.NewOfferClient(srv.URL)
	require.NoError(t, err)
	var failed []error
	k := &pool.Cluster{CS: cs, Namespace: "ci", Offers: oc, OfferFailed: func(err error) { failed = append(failed, err) }}
	p := pool.Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}
	cs.ClearActions()
	pod, err := k.ClaimWarm(context.Background(), p, poolapi.Owner{Job: "1"}, 0, nil)
	require.NoError(t, err)
	require.NotNil(t, pod)
	var verbs []string
	for _, a := range cs.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	assert.Equal(t, []string{"get", "patch"}, verbs, "a read and a write, no list")
	assert.Empty(t, failed)

	srv.Close()
	cs.ClearActions()
	pod2, err := k.ClaimWarm(context.Background(), p, poolapi.Owner{Job: "2"}, 0, nil)
	require.NoError(t, err)
	require.NotNil(t, pod2)
	assert.NotEqual(t, pod.Name, pod2.Name)
	require.Len(t, failed, 1)
	assert.ErrorContains(t, failed[0], srv.URL)
	assert.Equal(t, "list", cs.Actions()[0].GetVerb())
}

func counter(t *testing.T, s *Server, result string) float64 {
	t.Helper()
	return testutil.ToFloat64(s.offers.WithLabelValues(result))
}
