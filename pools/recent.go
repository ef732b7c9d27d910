package pools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ClaimsPath is where the leading controller serves its pools' recent
// claims (RecentClaims, JSON) beside /metrics; `warmpod-pools status`
// reads it from the Lease's holder.
const ClaimsPath = "/v1/claims"

// maxWaits caps the claims a pool keeps for Recent: a day of a pool's
// claims at about seven a minute. A busier pool's day is its last
// maxWaits claims (RecentClaims says how far back that reaches).
const maxWaits = 10_000

// waitSample is one claim whose wait is known: when the job got its pod,
// how long it waited for it, and whether a warm pod was there.
type waitSample struct {
	at   time.Time
	wait time.Duration
	warm bool
}

// addWait adds w to h's waits, the oldest dropped beyond maxWaits.
func addWait(h *poolHistory, w waitSample) {
	if len(h.waits) >= maxWaits {
		h.waits = slices.Delete(h.waits, 0, len(h.waits)-maxWaits+1)
	}
	h.waits = append(h.waits, w)
}

// ClaimWindow is a pool's claims over a window whose waits are known:
// warm claims and cold starts (the job waited for a pod to start: its own,
// or the pool's starting pod), and the wait from the driver's first look
// for a pod to a Ready pod held, at the median and the 95th percentile
// (nearest rank), in seconds. A cold pod that never became Ready is not
// counted: its wait is not known.
type ClaimWindow struct {
	Warm        int     `json:"warm"`
	Cold        int     `json:"cold"`
	WaitP50Secs float64 `json:"waitP50Seconds"`
	WaitP95Secs float64 `json:"waitP95Seconds"`
}

// RecentClaims is one pool's ClaimWindows over the last hour and the last
// day, as the leading controller's tracker knows them: since it started
// or took over (Since), at most history back.
type RecentClaims struct {
	Pool  string      `json:"pool"`
	Hour  ClaimWindow `json:"hour"`
	Day   ClaimWindow `json:"day"`
	Since time.Time   `json:"since"`
}

// window is the ClaimWindow of ws from from on.
func window(ws []waitSample, from time.Time) ClaimWindow {
	var c ClaimWindow
	var waits []time.Duration
	for _, w := range ws {
		if w.at.Before(from) {
			continue
		}
		if w.warm {
			c.Warm++
		} else {
			c.Cold++
		}
		waits = append(waits, w.wait)
	}
	if len(waits) == 0 {
		return c
	}
	slices.Sort(waits)
	rank := func(q float64) float64 {
		i := int(q*float64(len(waits))+0.999999) - 1 // nearest rank
		return waits[min(max(i, 0), len(waits)-1)].Seconds()
	}
	c.WaitP50Secs, c.WaitP95Secs = rank(0.5), rank(0.95)
	return c
}

// Began records when the tracker began to see claims (the controller's
// Start): what Recent calls Since.
func (t *Tracker) Began(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.began = at
}

// Recent is each pool's RecentClaims at now, for the pools of namespace ns
// the tracker knows, in the order of their names.
func (t *Tracker) Recent(ns string, now time.Time) []RecentClaims {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []RecentClaims
	for key, h := range t.pools {
		name, ok := strings.CutPrefix(key, ns+"/")
		if !ok {
			continue
		}
		out = append(out, RecentClaims{Pool: name, Hour: window(h.waits, now.Add(-time.Hour)),
			Day: window(h.waits, now.Add(-history)), Since: t.began.UTC()})
	}
	slices.SortFunc(out, func(a, b RecentClaims) int { return strings.Compare(a.Pool, b.Pool) })
	return out
}

// Recent is every pool's RecentClaims now (Tracker.Recent), for
// ClaimsPath. Safe to call from any goroutine, before Start too (nothing
// is known then).
func (c *Controller) Recent() []RecentClaims {
	return c.tracker.Recent(c.cfg.Namespace, c.clock.Now())
}

// ClaimsReply is the body of ClaimsPath.
type ClaimsReply struct {
	Pools []RecentClaims `json:"pools"`
}

// ClaimsHandler serves ClaimsPath from the controller lead returns: 503
// with a one-line reason when it returns nil (this replica follows: only
// the leader sees the claims), 405 for a method other than GET.
func ClaimsHandler(lead func() *Controller) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			http.Error(w, "GET only", http.StatusMethodNotAllowed)
			return
		}
		c := lead()
		if c == nil {
			http.Error(w, "this replica does not lead: the Lease's holder counts the claims", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ClaimsReply{Pools: c.Recent()})
	})
}

// FetchRecent reads the recent claims from the controller that holds
// Lease lease of namespace ns: its pod's ClaimsPath on port (its
// --metrics-addr's), through the API server's pod proxy (what a person's
// kubeconfig usually may do), or, where that is forbidden (the
// controller's own service account, in `kubectl exec … status`), from the
// pod's IP directly with hc. Errors name the step: no Lease or no holder
// (no controller runs), the holder's pod, the request, the reply.
func FetchRecent(ctx context.Context, cs kubernetes.Interface, ns, lease, port string, hc *http.Client) ([]RecentClaims, error) {
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, lease, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read the controller's Lease %s/%s: %w", ns, lease, err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return nil, fmt.Errorf("the Lease %s/%s has no holder: no controller leads", ns, lease)
	}
	holder := *l.Spec.HolderIdentity
	body, err := cs.CoreV1().Pods(ns).ProxyGet("http", holder, port, ClaimsPath, nil).DoRaw(ctx)
	if apierrors.IsForbidden(err) {
		body, err = fetchDirect(ctx, cs, ns, holder, port, hc)
	}
	if err != nil {
		return nil, fmt.Errorf("ask the leader, pod %s, on port %s: %w", holder, port, err)
	}
	var reply ClaimsReply
	if err := json.Unmarshal(body, &reply); err != nil {
		return nil, fmt.Errorf("the leader, pod %s, answered what is not a ClaimsReply: %w", holder, err)
	}
	return reply.Pools, nil
}

// fetchDirect GETs ClaimsPath from pod name's IP on port with hc.
func fetchDirect(ctx context.Context, cs kubernetes.Interface, ns, name, port string, hc *http.Client) ([]byte, error) {
	p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if p.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no IP yet", name)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(p.Status.PodIP, port)+ClaimsPath, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}
