package pool

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/warmpod/warmpod/poolapi"
)

// offerList is an Offers that hands out its offers in order, then none;
// err, when set, is every call's answer.
type offerList struct {
	offers []poolapi.Offer
	err    error
	asked  int
}

func (o *offerList) Offer(context.Context, string, Pool) (*poolapi.Offer, error) {
	o.asked++
	if o.err != nil {
		return nil, o.err
	}
	if len(o.offers) == 0 {
		return nil, nil
	}
	next := o.offers[0]
	o.offers = o.offers[1:]
	return &next, nil
}

// A claim with offers reads the offered pod (from the API server's cache)
// and patches it: no list. An offer is trusted for a name only: a pod
// another job holds, of another pool or configuration, retiring, being
// deleted, not Ready, no pool pod, of another uid, gone, or no name at all
// is read (or not even that) and left alone, and the next offer is taken;
// after offerTries of them, or none, or the controller down, the claim
// lists as it does without offers, and a controller that failed is
// reported.
func TestClaimWarmTakesOffers(t *testing.T) {
	off := func(name string) poolapi.Offer { return poolapi.Offer{Name: name, UID: "uid-" + name} }
	now := metav1.Now()
	hostile := map[string]func(*corev1.Pod){
		"claimed": func(p *corev1.Pod) {
			p.Labels[poolapi.LabelState], p.Labels[poolapi.LabelJob] = poolapi.StateClaimed, "99"
		},
		"other-pool":   func(p *corev1.Pod) { p.Labels[poolapi.LabelPool] = "golang" },
		"other-config": func(p *corev1.Pod) { p.Labels[poolapi.LabelConfig] = "other" },
		"retiring":     func(p *corev1.Pod) { p.Annotations = map[string]string{poolapi.AnnotationRetiring: "1"} },
		"deleting":     func(p *corev1.Pod) { p.DeletionTimestamp = &now },
		"not-ready":    func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		"no-pool-pod":  func(p *corev1.Pod) { p.Labels = map[string]string{"app": "gitlab-runner"} },
		"other-uid":    func(p *corev1.Pod) { p.UID = "uid-of-a-newer-pod" },
	}
	down := errors.New("connection refused")
	type tc struct {
		name   string
		offers offerList
		want   string
		verbs  []string
		failed int
	}
	cases := []tc{
		{"offered", offerList{offers: []poolapi.Offer{off("b")}}, "b", []string{"get b", "patch b"}, 0},
		{"an offer of a pod gone", offerList{offers: []poolapi.Offer{off("gone"), off("b")}}, "b", []string{"get gone", "get b", "patch b"}, 0},
		{"an offer that is no pod's name", offerList{offers: []poolapi.Offer{off("../secrets/x"), off("b")}}, "b", []string{"get b", "patch b"}, 0},
		{"offers lost offerTries times: list", offerList{offers: []poolapi.Offer{off("claimed"), off("retiring"), off("gone"), off("b")}}, "",
			[]string{"get claimed", "get retiring", "get gone", "list", "patch"}, 0},
		{"none offered: list", offerList{}, "", []string{"list", "patch"}, 0},
		{"controller down: list", offerList{err: down}, "", []string{"list", "patch"}, 1},
	}
	for name := range hostile {
		cases = append(cases, tc{"an offer of a pod " + name, offerList{offers: []poolapi.Offer{off(name), off("b")}}, "b", []string{"get " + name, "get b", "patch b"}, 0})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs := []k8sruntime.Object{readyPod("b", "1", true)}
			for name, edit := range hostile {
				p := readyPod(name, "1", true)
				edit(p)
				objs = append(objs, p)
			}
			cs, k := fakeAPI(objs...)
			k.Offers = &tc.offers
			failed := 0
			k.OfferFailed = func(err error) {
				failed++
				assert.ErrorIs(t, err, down)
			}
			pod, err := k.ClaimWarm(context.Background(), Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}, poolapi.Owner{Job: "1"}, 0, nil)
			require.NoError(t, err)
			require.NotNil(t, pod)
			if tc.want != "" {
				assert.Equal(t, tc.want, pod.Name)
			}
			assert.True(t, pod.Warm)
			got := verbs(cs)
			for i, v := range got {
				// The list path's patch is of a pod chosen at random.
				if strings.HasPrefix(v, "patch ") && i > 0 && got[i-1] == "list" {
					got[i] = "patch"
				}
			}
			assert.Equal(t, tc.verbs, got)
			assert.Equal(t, tc.failed, failed)
			claimed, err := cs.CoreV1().Pods("ci").Get(context.Background(), pod.Name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, poolapi.StateClaimed, claimed.Labels[poolapi.LabelState])
			assert.Equal(t, "1", claimed.Labels[poolapi.LabelJob])
			// Every pod the claim did not get is as it was.
			for name := range hostile {
				if name == pod.Name {
					continue
				}
				p, err := cs.CoreV1().Pods("ci").Get(context.Background(), name, metav1.GetOptions{})
				require.NoError(t, err)
				assert.Equal(t, "1", p.ResourceVersion, "pod %s was written", name)
			}
		})
	}
}

// A read from the API server's cache that is behind makes the patch a 409
// (its resourceVersion is the condition): the next offer is taken.
func TestClaimWarmOfferReadStale(t *testing.T) {
	cs, k := fakeAPI(readyPod("a", "2", true), readyPod("b", "1", true))
	cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.(k8stesting.GetAction).GetName() != "a" {
			return false, nil, nil
		}
		return true, readyPod("a", "1", true), nil // the cache's older version
	})
	k.Offers = &offerList{offers: []poolapi.Offer{{Name: "a", UID: "uid-a"}, {Name: "b", UID: "uid-b"}}}
	pod, err := k.ClaimWarm(context.Background(), Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h"}, poolapi.Owner{Job: "1"}, 0, nil)
	require.NoError(t, err)
	require.NotNil(t, pod)
	assert.Equal(t, "b", pod.Name)
	assert.Equal(t, []string{"get a", "patch a", "get b", "patch b"}, verbs(cs))
}

// A claim with a fit reads the offered pod (the resize needs its
// resources) and takes only one that is still what was offered.
func TestClaimWarmOfferWithFit(t *testing.T) {
	a, b := readyPod("a", "1", true), readyPod("b", "1", true)
	a.Labels[poolapi.LabelState] = poolapi.StateClaimed // claimed since the offer
	for _, p := range []*corev1.Pod{a, b} {
		p.Spec.Containers = []corev1.Container{{Name: "warmpod", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	}
	cs, k := fakeAPI(a, b)
	k.Offers = &offerList{offers: []poolapi.Offer{{Name: "a", UID: "uid-a"}, {Name: "b", UID: "uid-b"}}}
	fit := &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}
	pod, err := k.ClaimWarm(context.Background(), Pool{Name: "alpine", HashLabel: poolapi.LabelConfig, Hash: "h", Container: "warmpod"}, poolapi.Owner{Job: "1"}, 0, fit)
	require.NoError(t, err)
	require.NotNil(t, pod)
	assert.Equal(t, "b", pod.Name)
	assert.NotNil(t, pod.Resize)
	assert.Equal(t, []string{"get a", "get b", "patch/resize b", "patch b"}, verbs(cs))
}

// OfferClient reads the controller's answers: 200 an offer, 204 none,
// anything else (or an offer without its fields) an error naming it.
func TestOfferClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		code   int
		body   string
		want   *poolapi.Offer
		errHas string
	}{
		{"offer", 200, `{"name":"a","uid":"u"}`, &poolapi.Offer{Name: "a", UID: "u"}, ""},
		{"no pod's name", 200, `{"name":"../secrets/x","uid":"u"}`, nil, "not a pod's name"},
		{"a redirect, not followed", 302, "", nil, "302 Found"},
		{"none", 204, "", nil, ""},
		{"other namespace", 404, "this controller offers the pods of namespace x", nil, "404 Not Found: this controller offers"},
		{"not synced", 503, "not synced", nil, "503"},
		{"garbage", 200, `{"name":`, nil, "unexpected end"},
		{"empty offer", 200, `{}`, nil, "not a pod's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q map[string][]string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, poolapi.OfferPath, r.URL.Path)
				q = r.URL.Query()
				if tc.code == http.StatusFound {
					w.Header().Set("Location", "http://127.0.0.1:1/elsewhere")
				}
				w.WriteHeader(tc.code)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := NewOfferClient(srv.URL)
			require.NoError(t, err)
			got, err := c.Offer(context.Background(), "ci", Pool{Name: "alpine", HashLabel: poolapi.LabelTemplateHash, Hash: "abc"})
			if tc.errHas != "" {
				require.ErrorContains(t, err, tc.errHas)
				assert.ErrorContains(t, err, srv.URL)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, map[string][]string{poolapi.OfferNamespace: {"ci"}, poolapi.OfferPool: {"alpine"},
				poolapi.OfferLabel: {poolapi.LabelTemplateHash}, poolapi.OfferHash: {"abc"}}, q)
		})
	}
}
