package pools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmpod/warmpod/executor/pool"
	"github.com/warmpod/warmpod/poolapi"
)

// Event reasons of pools found from the jobs (Config.Discovery).
const (
	// EventPoolFound: on a pool the controller made for an image that kept
	// going cold without a pool; the message says how many jobs and from
	// which base.
	EventPoolFound = "PoolFound"
	// EventPoolRemoved: on a pool the controller had made, removed since
	// no job claimed from it for the rule's IdleFor.
	EventPoolRemoved = "PoolRemoved"
	// EventNoBasePool is logged (there is no object to put it on) when a
	// pool is due but the namespace has no default pool to make it from.
	EventNoBasePool = "NoBasePool"
)

// FoundPolicy is the policy of a pool made from the jobs: no period, the
// pool at zero when nothing is expected; what it learns (its profile, its
// keep-alive) sizes it.
const FoundPolicy = "- idle_count: 0\n  idle_time: 30m"

// noPool counts a cold job that found no pool for its image (podEvent's,
// from the informer's goroutine).
func (c *Controller) noPool(image string, at time.Time) {
	if c.cfg.Discovery.After <= 0 || image == "" {
		return
	}
	c.finderMu.Lock()
	defer c.finderMu.Unlock()
	c.finder.Cold(image, at)
}

// discover applies Config.Discovery to the namespace's pools deps (sorted
// by name): it
// removes the pools it made that no job used for IdleFor, then makes a pool
// from the default pool's Deployment for each image due one, up to Max
// such pools. A pool a person wrote (without poolapi.AnnotationFoundFrom)
// is never made, changed or removed here. It returns the pools it removed,
// which this decision no longer sizes. Errors: the API server's, after
// every pool was tried; what failed is tried again at the next decision.
func (c *Controller) discover(ctx context.Context, deps []*appsv1.Deployment, now time.Time) (map[string]bool, error) {
	removed := map[string]bool{}
	rule := c.cfg.Discovery
	var base *appsv1.Deployment
	images := map[string]bool{} // the images of the pools a person wrote
	for _, d := range deps {
		if _, found := d.Annotations[poolapi.AnnotationFoundFrom]; !found && d.DeletionTimestamp == nil {
			images[pool.JobImage(&d.Spec.Template.Spec)] = true
		}
	}
	made := 0
	var errs []error
	for _, d := range deps {
		if d.DeletionTimestamp != nil {
			continue
		}
		image, found := d.Annotations[poolapi.AnnotationFoundFrom]
		if !found {
			// The drivers' default pool, whose template makes the cold
			// pods of images without a pool: the one annotated default,
			// else the first by name (deps are sorted by name), as
			// pool.Cluster.Pools picks it; never a pool made here.
			if base == nil || d.Annotations[poolapi.AnnotationDefaultPool] == "true" && base.Annotations[poolapi.AnnotationDefaultPool] != "true" {
				base = d
			}
			continue
		}
		key := d.Namespace + "/" + d.Name
		// Removed once unused, or once a person wrote a pool for its
		// image: that pool is the one to size, not a second beside it.
		last := c.tracker.LastClaim(key)
		if superseded := images[image]; superseded || rule.Unused(c.tracker.of(d.CreationTimestamp.Time), last, now) {
			err := c.cs.AppsV1().Deployments(d.Namespace).Delete(ctx, d.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &d.UID}})
			if err != nil && !apierrors.IsNotFound(err) {
				c.m.errors.WithLabelValues("discover").Inc()
				errs = append(errs, fmt.Errorf("removing pool %s: %w", d.Name, err))
				made++
				continue
			}
			removed[d.Name] = true
			since := "it was made"
			if !last.IsZero() {
				since = "its last claim at " + last.UTC().Format(time.RFC3339)
			}
			msg := fmt.Sprintf("removed: no job of %s claimed from it for %s since %s", image, rule.IdleFor, since)
			if superseded {
				msg = fmt.Sprintf("removed: a pool written for %s runs its jobs now", image)
			}
			c.rec.Event(d, corev1.EventTypeNormal, EventPoolRemoved, msg)
			c.log.Info("pool found from the jobs removed", "pool", d.Name, "image", image, "reason", msg)
			continue
		}
		made++
	}
	c.finderMu.Lock()
	due := c.finder.Due(now, made)
	colds := map[string][]time.Time{}
	for _, image := range due {
		colds[image] = c.finder.Colds(image, now)
		c.finder.Made(image) // made now, or has a pool: counted again from here if it fails
	}
	c.finderMu.Unlock()
	for _, image := range due {
		if images[image] {
			continue // a pool runs it now (written meanwhile)
		}
		if base == nil {
			c.log.Warn("a pool is due for an image, but the namespace has no default pool to make it from",
				"image", image, "reason", EventNoBasePool, "annotation", poolapi.AnnotationDefaultPool)
			continue
		}
		// Always FoundPolicy, not the base's: a base's min or idle_count
		// copied to 20 pools nobody asked for would hold the budget.
		name := foundName(image)
		d, err := pool.FromBase(base, name, image, map[string]string{poolapi.AnnotationFoundFrom: image, poolapi.AnnotationPolicy: FoundPolicy})
		if err != nil {
			errs = append(errs, fmt.Errorf("making a pool for %s from %s: %w", image, base.Name, err))
			continue
		}
		created, err := c.cs.AppsV1().Deployments(base.Namespace).Create(ctx, d, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			c.m.errors.WithLabelValues("discover").Inc()
			errs = append(errs, fmt.Errorf("making a pool for %s: %w", image, err))
			continue
		}
		c.tracker.SeedColds(created.Namespace+"/"+created.Name, colds[image])
		msg := fmt.Sprintf("made from %s for %s: %d jobs of it went cold without a pool within %s", base.Name, image, len(colds[image]), rule.Within)
		c.rec.Event(created, corev1.EventTypeNormal, EventPoolFound, msg)
		c.log.Info("pool found from the jobs", "pool", name, "image", image, "reason", msg)
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("pools from the jobs: %w", errors.Join(errs...))
	}
	return removed, nil
}

// foundName is the name of the pool made for image: "auto-", the image's
// last path element and tag made a DNS label, and 8 hex digits of its
// SHA-256 (two images whose names read alike get two pools), at most 63
// characters.
func foundName(image string) string {
	sum := sha256.Sum256([]byte(image))
	short := image[strings.LastIndexByte(image, '/')+1:]
	short, _, _ = strings.Cut(short, "@")
	var b strings.Builder
	for _, r := range strings.ToLower(short) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	mid := strings.Trim(b.String(), "-")
	if len(mid) > 45 {
		mid = strings.TrimRight(mid[:45], "-")
	}
	if mid == "" {
		mid = "image"
	}
	return "auto-" + mid + "-" + hex.EncodeToString(sum[:4])
}
