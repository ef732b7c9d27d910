package pool

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// A claim with offers is the offer's patch alone, conditioned on the
// offered resourceVersion: no list. An offer the cache got wrong (the pod
// changed since: 409) is followed by the next; after offerTries of them,
// or none, or the controller down, the claim lists as it does without
// offers, and a controller that failed is reported.
func TestClaimWarmTakesOffers(t *testing.T) {
	off := func(name, rv string) poolapi.Offer {
		return poolapi.Offer{Name: name, UID: "uid-" + name, ResourceVersion: rv}
	}
	down := errors.New("connection refused")
	for _, tc := range []struct {
		name   string
		offers offerList
		want   string
		verbs  []string
		failed int
	}{
		{"offered", offerList{offers: []poolapi.Offer{off("b", "1")}}, "b", []string{"patch b"}, 0},
		{"a stale offer, then a good one", offerList{offers: []poolapi.Offer{off("a", "0"), off("b", "1")}}, "b", []string{"patch a", "patch b"}, 0},
		{"an offer of a pod gone", offerList{offers: []poolapi.Offer{off("gone", "1"), off("b", "1")}}, "b", []string{"patch gone", "patch b"}, 0},
		{"offers lost offerTries times: list", offerList{offers: []poolapi.Offer{off("a", "0"), off("a", "0"), off("a", "0"), off("b", "1")}}, "",
			[]string{"patch a", "patch a", "patch a", "list", "patch"}, 0},
		{"none offered: list", offerList{}, "", []string{"list", "patch"}, 0},
		{"controller down: list", offerList{err: down}, "", []string{"list", "patch"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, k := fakeAPI(readyPod("a", "1", true), readyPod("b", "1", true))
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
				if v == "patch a" || v == "patch b" {
					if i > 0 && got[i-1] == "list" {
						got[i] = "patch"
					}
				}
			}
			assert.Equal(t, tc.verbs, got)
			assert.Equal(t, tc.failed, failed)
			claimed, err := cs.CoreV1().Pods("ci").Get(context.Background(), pod.Name, metav1.GetOptions{})
			require.NoError(t, err)
			assert.Equal(t, poolapi.StateClaimed, claimed.Labels[poolapi.LabelState])
			assert.Equal(t, "1", claimed.Labels[poolapi.LabelJob])
		})
	}
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
	k.Offers = &offerList{offers: []poolapi.Offer{{Name: "a", UID: "uid-a", ResourceVersion: "1"}, {Name: "b", UID: "uid-b", ResourceVersion: "1"}}}
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
		{"offer", 200, `{"name":"a","uid":"u","resourceVersion":"7"}`, &poolapi.Offer{Name: "a", UID: "u", ResourceVersion: "7"}, ""},
		{"none", 204, "", nil, ""},
		{"other namespace", 404, "this controller offers the pods of namespace x", nil, "404 Not Found: this controller offers"},
		{"not synced", 503, "not synced", nil, "503"},
		{"garbage", 200, `{"name":`, nil, "unexpected end"},
		{"empty offer", 200, `{}`, nil, "without name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q map[string][]string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				assert.Equal(t, poolapi.OfferPath, r.URL.Path)
				q = r.URL.Query()
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
