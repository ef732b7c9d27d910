package main

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/pools"
)

// status is `warmpod-pools status`: every pool of the namespace, its pods
// by state, its target, floor and max, why the controller gave it its
// size, and the bursts its learned profile expects in the next day
// (pools.Views). It reads the cluster only (Deployments and pods: what
// `kubectl get` needs). Exit 0, 2 on usage, 1 when the cluster cannot be
// read.
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
	now := time.Now()
	if err := pools.RenderViews(stdout, pools.Views(deps.Items, pods.Items, now), now); err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: status:", err)
		return 1
	}
	return 0
}
