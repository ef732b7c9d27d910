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
	"k8s.io/apimachinery/pkg/types"

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
	// HTTP is the client (nil: one of its own, without keep-alive beyond
	// the driver's process).
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
	return &OfferClient{URL: u, HTTP: &http.Client{}}, nil
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
		hc = http.DefaultClient
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
	if o.Name == "" || o.UID == "" || o.ResourceVersion == "" {
		return nil, fmt.Errorf("offer from %s: a pod without name, uid or resourceVersion: %.200s", c.URL.Redacted(), body)
	}
	return &o, nil
}

// offerTries is how many offers a claim takes before it lists the pool
// instead: an offer lost to another claim (409) means the controller's
// cache is behind, and a few in a row that the list does better.
const offerTries = 3

// errOffers is why claimOffered gave up on offers; the claim lists.
var errOffers = errors.New("no claim from offers")

// claimOffered claims a pod the controller offers (Cluster.Offers), one
// write per offer: the claim's patch, whose resourceVersion precondition
// is the offered one, so the checks the controller made of that version
// (idle, Ready, not retiring, of p's configuration) hold for the pod
// claimed. With fit, the pod is read first (the resize needs its
// resources), and claimed as a listed one is. It returns errOffers when
// no offer gave a pod (none, the controller unreachable, offerTries lost
// to others): the caller lists the pool. Other errors are the claim's
// (a resize refused: ErrResizeUnsupported).
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
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: k.Namespace, UID: types.UID(o.UID), ResourceVersion: o.ResourceVersion}}
		if fit != nil {
			cur, err := k.CS.CoreV1().Pods(k.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("read offered pod %s: %w", o.Name, err)
			case string(cur.UID) != o.UID || cur.Labels[poolapi.LabelState] != poolapi.StateIdle || cur.Labels[p.hashKey()] != p.Hash ||
				!PodReady(cur) || cur.Annotations[poolapi.AnnotationRetiring] != "" || resizedByClaimer(cur):
				// Changed since the offer: the controller's cache is
				// behind, as a 409 would have said.
				continue
			}
			pod = cur
		}
		claimed, resizing, err := k.claimFit(ctx, pod, p.Container, owner, time.Since(began), fit)
		switch {
		case err == nil:
			return claimedPod(claimed, p, resizing), nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || errors.Is(err, errPodGone):
			continue
		case errors.Is(err, ErrResizeUnsupported):
			return nil, err
		default:
			return nil, fmt.Errorf("claim offered pod %s: %w", o.Name, err)
		}
	}
	return nil, errOffers
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
