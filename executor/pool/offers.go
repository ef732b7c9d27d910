package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/warmpod/warmpod/poolapi"
)

// Offers names an idle pod of a pool for a claim: the pool controller's
// offer endpoint (poolapi.OfferPath), which keeps every pool pod in an
// informer's cache, so the claim need not list the pool.
type Offers interface {
	// Offer returns an idle, Ready pod of p in namespace ns not offered
	// to another claim just before; nil and no error when there is none
	// now. An error means no offer could be had (the controller is down,
	// slow or refuses): the claim lists the pool instead.
	Offer(ctx context.Context, ns string, p Pool) (*poolapi.Offer, error)
}

// OfferClient is Offers over HTTP: the controller's Service, in the
// cluster. Its calls are bounded by OfferTimeout each.
type OfferClient struct {
	// URL is the controller's base URL (http://warmpod-pools.ci:9090); the
	// path is poolapi.OfferPath.
	URL *url.URL
	// HTTP is the client (nil: offerHTTP's, no proxy and no redirects).
	HTTP *http.Client
}

// OfferTimeout bounds one call to the controller's offer endpoint. An
// offer is an in-memory lookup, answered within a millisecond when the
// controller is well; a controller that does not answer within this is
// treated as down and the claim lists the pool, as it does without one.
// Unreachable costs the claim this once (a refused connection, nothing).
const OfferTimeout = 300 * time.Millisecond

// NewOfferClient returns an OfferClient for the controller at raw
// (poolapi.ParseOfferURL). Errors name what is wrong with raw.
func NewOfferClient(raw string) (*OfferClient, error) {
	u, err := poolapi.ParseOfferURL(raw)
	if err != nil {
		return nil, err
	}
	return &OfferClient{URL: u, HTTP: offerHTTP()}, nil
}

// offerHTTP is the HTTP client of the offers: no proxy (the controller is
// a Service in the cluster; a runner's $HTTP_PROXY is for the Internet,
// and a proxy would answer in the controller's name), and no redirect
// followed (a 3xx is an error, and the claim lists).
func offerHTTP() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Offer asks the controller for an idle pod of p ([Offers]). Errors name
// the URL and the answer.
func (c *OfferClient) Offer(ctx context.Context, ns string, p Pool) (*poolapi.Offer, error) {
	ctx, cancel := context.WithTimeout(ctx, OfferTimeout)
	defer cancel()
	u := c.URL.JoinPath(poolapi.OfferPath)
	u.RawQuery = url.Values{poolapi.OfferNamespace: {ns}, poolapi.OfferPool: {p.Name},
		poolapi.OfferLabel: {p.hashKey()}, poolapi.OfferHash: {p.Hash}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = offerHTTP()
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("offer from %s: %w", c.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("offer from %s: %w", c.URL.Redacted(), err)
	}
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("offer from %s: %s: %.200s", c.URL.Redacted(), resp.Status, body)
	}
	var o poolapi.Offer
	if err := json.Unmarshal(body, &o); err != nil {
		return nil, fmt.Errorf("offer from %s: %w", c.URL.Redacted(), err)
	}
	if len(validation.IsDNS1123Subdomain(o.Name)) > 0 || o.UID == "" {
		return nil, fmt.Errorf("offer from %s: not a pod's name and uid: %.200s", c.URL.Redacted(), body)
	}
	return &o, nil
}

// offerTries is how many offers a claim takes before it lists the pool
// instead: an offer lost to another claim (409) means the controller's
// cache is behind, and a few in a row that the list does better.
const offerTries = 3

// errOffers is why claimOffered gave up on offers; the claim lists.
var errOffers = errors.New("no claim from offers")

// claimOffered claims a pod the controller offers (Cluster.Offers). An
// offer is trusted for a name only: the claim reads the pod from the API
// server (its watch cache: resourceVersion "0", no etcd read) and claims
// it only when that pod is claimable for p (claimable: idle, of p's pool
// and configuration, Ready, not being deleted, not retiring, not resized
// for another claim), with the resourceVersion it read as the patch's
// precondition, as a listed pod is claimed. So a wrong, stale or hostile
// offer (another job's pod, another pool's, a pod that is no pool pod, a
// forged resourceVersion) costs a read and is never claimed. It returns
// errOffers when no offer gave a pod (none, the controller unreachable,
// offerTries offers lost to others or not claimable): the caller lists
// the pool. Other errors are the claim's (a resize refused:
// ErrResizeUnsupported; the API server's, other than those of the one
// offered pod).
func (k *Cluster) claimOffered(ctx context.Context, p Pool, owner poolapi.Owner, began time.Time, fit *corev1.ResourceRequirements) (*poolapi.Pod, error) {
	for range offerTries {
		o, err := k.Offers.Offer(ctx, k.Namespace, p)
		if err != nil {
			if k.OfferFailed != nil {
				k.OfferFailed(err)
			}
			return nil, errOffers
		}
		if o == nil {
			return nil, errOffers
		}
		if len(validation.IsDNS1123Subdomain(o.Name)) > 0 {
			// No pod's name (OfferClient refuses it too): client-go
			// would refuse it before sending, as no API error.
			continue
		}
		pod, err := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, o.Name, metav1.GetOptions{ResourceVersion: "0"})
		switch {
		case lostOffer(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("read offered pod %s: %w", o.Name, err)
		case string(pod.UID) != o.UID || !p.claimable(pod):
			// Not the pod offered, or not claimable (any more): the
			// controller's cache is behind, or the offer is wrong.
			continue
		}
		claimed, resizing, err := k.claimFit(ctx, pod, p.Container, owner, time.Since(began), fit)
		switch {
		case err == nil:
			return claimedPod(claimed, p, resizing), nil
		case lostOffer(err) || errors.Is(err, errPodGone):
			continue
		case errors.Is(err, ErrResizeUnsupported):
			return nil, err
		default:
			return nil, fmt.Errorf("claim offered pod %s: %w", o.Name, err)
		}
	}
	return nil, errOffers
}

// lostOffer tells whether err is of the offered pod alone: gone (404),
// changed (409), or a name or request the API server refuses (400, 422;
// client-go refuses a name with a slash before sending). The claim takes
// the next offer.
func lostOffer(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// claimedPod is what ClaimWarm returns for pod, claimed from p.
func claimedPod(pod *corev1.Pod, p Pool, resizing *Resizing) *poolapi.Pod {
	claimed := &poolapi.Pod{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), Pool: p.Name,
		Container: p.Container, Bin: p.Bin, Hash: p.Hash, Warm: true, Sidecars: len(p.Sidecars())}
	if resizing != nil {
		// Not a nil *Resizing in the interface: that would be a resize
		// to wait for.
		claimed.Resize = resizing
	}
	return claimed
}
