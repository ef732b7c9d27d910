package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
)

// status is `warmpod-pools status`: every pool of the namespace, its pods
// by state, its target, floor and max, why the controller gave it its
// size, and the bursts its learned profile expects in the next day
// (pools.Views), and each pool's warm claims and claim wait of the last
// hour and day, which only the leading controller counts (recentClaims:
// when it cannot be asked, status says why in one line and shows the
// rest). It reads Deployments, pods and the Lease, and proxies to the
// leader's pod. Exit 0, 2 on usage, 1 when the pools cannot be read.
func status(ctx context.Context, o options, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "warmpod-pools: status takes no argument (the namespace is --namespace); got %q\n", args[0])
		return exitUsage
	}
	cs, ns, deps, err := listPools(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: status:", err)
		return 1
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelPool})
	if err != nil {
		fmt.Fprintf(stderr, "warmpod-pools: status: list the pool pods of namespace %s: %v\n", ns, err)
		return 1
	}
	if len(deps.Items) == 0 {
		fmt.Fprintf(stdout, "no pool in namespace %s (Deployments labelled %s)\n", ns, poolapi.PoolSelector)
		return 0
	}
	views := pools.Views(deps.Items, pods.Items, time.Now())
	if recent, err := recentClaims(ctx, cs, ns, o); err != nil {
		// The pools' sizes and reasons are the cluster's and still shown.
		fmt.Fprintf(stdout, "claims of the last hour and day: not known: %v\n\n", err)
	} else {
		pools.WithClaims(views, recent)
	}
	now := time.Now()
	if err := pools.RenderViews(stdout, views, now); err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: status:", err)
		return 1
	}
	return 0
}

// recentClaims asks the leading controller for its pools' recent claims
// (pools.FetchRecent), on the port of --metrics-addr, within 5 s.
func recentClaims(ctx context.Context, cs kubernetes.Interface, ns string, o options) ([]pools.RecentClaims, error) {
	if o.metricsAddr == "" {
		return nil, errors.New("--metrics-addr is empty, so the controller serves none")
	}
	_, port, err := net.SplitHostPort(o.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return pools.FetchRecent(ctx, cs, ns, o.lease, port, &http.Client{Timeout: 5 * time.Second,
		// The pod's IP is the cluster's: never through an HTTP proxy.
		Transport: &http.Transport{Proxy: nil}})
}
