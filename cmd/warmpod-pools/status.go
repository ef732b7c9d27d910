package main

import (
	"context"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/warmpod/warmpod/internal/kubeclient"
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
	cl, err := kubeclient.New(o.kubeconfig, o.namespace, "warmpod-pools/"+version)
	if err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: status:", err)
		return 1
	}
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: status:", err)
		return 1
	}
	deps, err := cs.AppsV1().Deployments(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: poolapi.PoolSelector})
	if err != nil {
		fmt.Fprintf(stderr, "warmpod-pools: status: list the pools of namespace %s: %v\n", cl.Namespace, err)
		return 1
	}
	pods, err := cs.CoreV1().Pods(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: poolapi.LabelPool})
	if err != nil {
		fmt.Fprintf(stderr, "warmpod-pools: status: list the pool pods of namespace %s: %v\n", cl.Namespace, err)
		return 1
	}
	if len(deps.Items) == 0 {
		fmt.Fprintf(stdout, "no pool in namespace %s (Deployments labelled %s)\n", cl.Namespace, poolapi.PoolSelector)
		return 0
	}
	now := time.Now()
	if err := pools.RenderViews(stdout, pools.Views(deps.Items, pods.Items, now), now); err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: status:", err)
		return 1
	}
	return 0
}
