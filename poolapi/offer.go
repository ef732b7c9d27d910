package poolapi

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// OfferPath is where the pool controller (every replica, on its metrics
// address) offers a driver an idle pod to claim: GET with the query
// parameters OfferNamespace, OfferPool, OfferLabel and OfferHash. The
// answer is 200 with an Offer, 204 when no pod of the pool is claimable
// now, 400 for a malformed query, 404 when the namespace is not the
// controller's, 503 until its pod cache has synced.
//
// An offer is a name, never a claim: the driver reads the pod from the
// API server, checks it is claimable for its pool itself, and claims it
// with its own write, conditioned on the resourceVersion it read. A stale,
// wrong or forged offer costs that read and nothing else. What it saves
// is the driver's list of the pool, and the conflicts of claimers that
// all read the same pods: at a thousand claims in ten seconds those were
// most of a claim's latency (bench/claims.md).
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
// last saw it. The driver claims the pod of this name only while it has
// this uid (not a pod of the same name made since).
type Offer struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// ParseOfferURL reads the drivers' --offers flag: the controller's base
// URL, http or https, with a host and no query. Errors name what is wrong
// and show the form.
func ParseOfferURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	const form = "such as http://warmpod-pools.NAMESPACE:9090"
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the URL again
	}
	switch {
	case err != nil:
		return nil, fmt.Errorf("offers URL %q: %v, %s", raw, err, form)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("offers URL %q: want http:// or https://, %s", raw, form)
	case u.Hostname() == "":
		return nil, fmt.Errorf("offers URL %q: no host, %s", raw, form)
	case u.Port() != "" && !validPort(u.Port()):
		return nil, fmt.Errorf("offers URL %q: port %s is not 1–65535, %s", raw, u.Port(), form)
	case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), OfferPath):
		return nil, fmt.Errorf("offers URL %q: the controller's base URL, without %s, %s", raw, OfferPath, form)
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return nil, fmt.Errorf("offers URL %q: a base URL has no query, fragment or user, %s", raw, form)
	}
	return u, nil
}

func validPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 1 && n <= 65535
}
