package poolapi

import (
	"fmt"
	"net/url"
)

// OfferPath is where the pool controller (every replica, on its metrics
// address) offers a driver an idle pod to claim: GET with the query
// parameters OfferNamespace, OfferPool, OfferLabel and OfferHash. The
// answer is 200 with an Offer, 204 when no pod of the pool is claimable
// now, 400 for a malformed query, 404 when the namespace is not the
// controller's, 503 until its pod cache has synced.
//
// An offer is advice, never a claim: the driver claims the pod with its
// own write, on the condition that the pod is still at the offered
// resourceVersion (the version the controller checked was idle, Ready
// and not retiring), so a stale or wrong offer costs a 409 and nothing
// else. What it saves is the driver's list of the pool: at a thousand
// claims in ten seconds that list was most of a claim's latency
// (bench/claims.md).
const OfferPath = "/v1/offer"

// The query parameters of OfferPath.
const (
	// OfferNamespace is the driver's namespace: a controller of another
	// namespace answers 404, so a URL of the wrong release is noticed.
	OfferNamespace = "namespace"
	// OfferPool is the pool's name (LabelPool).
	OfferPool = "pool"
	// OfferLabel and OfferHash are the label that holds the pods'
	// configuration and its value: LabelConfig or LabelTemplateHash, as
	// the driver read it from the pool's Deployment.
	OfferLabel = "label"
	OfferHash  = "hash"
)

// Offer is OfferPath's answer: one idle pod, as the controller's cache
// last saw it.
type Offer struct {
	Name            string `json:"name"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

// ParseOfferURL reads the drivers' --offers flag: the controller's base
// URL, http or https, with a host and no query. Errors name what is wrong
// and show the form.
func ParseOfferURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	const form = "such as http://warmpod-pools.NAMESPACE:9090"
	switch {
	case err != nil:
		return nil, fmt.Errorf("offers URL %q: %v", raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("offers URL %q: want http:// or https://, %s", raw, form)
	case u.Host == "":
		return nil, fmt.Errorf("offers URL %q: no host, %s", raw, form)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("offers URL %q: a base URL has no query, fragment or user, %s", raw, form)
	}
	return u, nil
}
