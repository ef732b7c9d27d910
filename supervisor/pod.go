package supervisor

import (
	"context"
	"errors"
	"os"

	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/podapi"
)

// KubePod is the real Pod: the kubelet's termination log and the API
// server. Its fields are set once, in cmd/warmpod.
type KubePod struct {
	// TerminationLog is where the one-line JSON exit reason goes
	// (terminationMessagePath, /dev/termination-log in a pod); written only
	// when the file exists, as the kubelet's bind mount makes it. Empty: off.
	TerminationLog string
	// SelfDelete is "auto" (delete the pod when the downward-API env and a
	// service-account token are present), "always" (try, and log why it
	// cannot) or "never".
	SelfDelete string
	// ServiceAccountDir holds token, ca.crt, namespace (default
	// /var/run/secrets/kubernetes.io/serviceaccount).
	ServiceAccountDir string
	// Getenv reads the downward-API environment (os.Getenv).
	Getenv func(string) string
	// Log receives what happened.
	Log *initlog.Logger
}

// Terminated writes m where the kubelet reads it; a missing file means
// the pod has no terminationMessagePath mount (or this is not a pod).
func (p KubePod) Terminated(m podapi.TerminationMessage) {
	if p.TerminationLog == "" {
		return
	}
	if _, err := os.Stat(p.TerminationLog); err != nil {
		p.Log.Debug("no termination log", "path", p.TerminationLog, "error", err)
		return
	}
	if err := podapi.WriteTerminationMessage(p.TerminationLog, m); err != nil {
		p.Log.Warn("cannot write the termination message", "error", err)
	}
}

// DeleteSelf deletes the pod (--self-delete), so the garbage collector
// removes the Secrets and ConfigMaps whose ownerReference names it. It
// tells whether the pod is going: deleted by this call (podapi.Deleted)
// or gone already (podapi.AlreadyGone).
func (p KubePod) DeleteSelf(ctx context.Context) bool {
	if p.SelfDelete == "never" {
		return false
	}
	cfg, err := podapi.FromEnv(p.Getenv, p.ServiceAccountDir)
	if err != nil {
		if p.SelfDelete == "always" || !errors.Is(err, podapi.ErrNotInCluster) {
			p.Log.Warn("pod not deleted", "error", err)
		} else {
			p.Log.Debug("not in a cluster: no self-deletion", "error", err)
		}
		return false
	}
	res, err := cfg.DeleteSelf(ctx, p.Log.With("component", "podapi"))
	if err != nil {
		// The one log of a failed self-deletion: podapi returns its
		// errors without logging them.
		p.Log.Warn("self-deletion", "result", string(res), "pod", cfg.Pod.Namespace+"/"+cfg.Pod.Name, "uid", cfg.Pod.UID, "error", err)
		return false
	}
	p.Log.Info("self-deletion", "result", string(res), "pod", cfg.Pod.Namespace+"/"+cfg.Pod.Name)
	return res == podapi.Deleted || res == podapi.AlreadyGone
}
