package main

import (
	"context"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/warmpod/warmpod/internal/kubeclient"
	"github.com/warmpod/warmpod/poolapi"
	"github.com/warmpod/warmpod/sizing"
)

// Exit statuses of check, as the rest of warmpod's commands (sysexits).
const (
	exitBadPolicy = 65 // EX_DATAERR: a policy has a mistake
	exitUsage     = 2
)

// check is `warmpod-pools check [FILE | -]`: it reads a pool policy (the
// warmpod.dev/policy annotation's text, decision 0005) from FILE, or from
// standard input for "-", or, with no argument, every pool's policy in the
// namespace from the cluster, and prints every mistake, each with its
// period, key and what the key takes (sizing.Check), before the controller
// meets it. Exit 0 when every policy is valid, 65 when one is not, 2 on
// usage, 1 when the cluster cannot be read.
func check(ctx context.Context, o options, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintf(stderr, "warmpod-pools: check takes one FILE (or - for standard input), or none to check the namespace's pools; got %d arguments\n", len(args))
		return exitUsage
	}
	if len(args) == 1 {
		name, r := args[0], stdin
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				fmt.Fprintln(stderr, "warmpod-pools: check:", err)
				return exitUsage
			}
			if st, err := f.Stat(); err == nil && st.IsDir() {
				f.Close()
				fmt.Fprintf(stderr, "warmpod-pools: check: %s is a directory; give a policy's file, or - for standard input\n", name)
				return exitUsage
			}
			defer f.Close()
			r = f
		} else {
			name = "standard input"
		}
		text, err := io.ReadAll(io.LimitReader(r, sizing.MaxPolicyBytes+1))
		if err != nil {
			fmt.Fprintln(stderr, "warmpod-pools: check:", err)
			return 1
		}
		if len(text) > sizing.MaxPolicyBytes {
			// Read up to one byte over the limit: the size is not known.
			fmt.Fprintf(stdout, "%s: more than %d bytes; a policy is at most that\n", name, sizing.MaxPolicyBytes)
			return exitBadPolicy
		}
		if report(stdout, name, string(text)) {
			return exitBadPolicy
		}
		return 0
	}
	return checkCluster(ctx, o, stdout, stderr)
}

// checkCluster checks the policy of every pool Deployment of the namespace.
func checkCluster(ctx context.Context, o options, stdout, stderr io.Writer) int {
	_, ns, deps, err := listPools(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "warmpod-pools: check:", err)
		return 1
	}
	bad := false
	for _, d := range deps.Items {
		name := "deployment/" + d.Name
		text, has := d.Annotations[poolapi.AnnotationPolicy]
		if !has {
			fmt.Fprintf(stdout, "%s: no %s (the controller leaves its size alone)\n", name, poolapi.AnnotationPolicy)
			continue
		}
		bad = report(stdout, name, text) || bad
	}
	if len(deps.Items) == 0 {
		fmt.Fprintf(stdout, "namespace %s has no pools (Deployments labelled %s)\n", ns, poolapi.PoolSelector)
	}
	if bad {
		return exitBadPolicy
	}
	return 0
}

// report prints name's mistakes, or that it is valid, and tells whether it
// had any.
func report(w io.Writer, name, text string) bool {
	errs := sizing.Check(text)
	for _, err := range errs {
		fmt.Fprintf(w, "%s: %v\n", name, err)
	}
	if len(errs) == 0 {
		fmt.Fprintf(w, "%s: ok\n", name)
	}
	return len(errs) > 0
}

// listPools connects as the flags say and lists the namespace's pool
// Deployments, for check and status. Errors: the kubeconfig's, or the
// list's, naming the namespace.
func listPools(ctx context.Context, o options) (kubernetes.Interface, string, *appsv1.DeploymentList, error) {
	cl, err := kubeclient.New(o.kubeconfig, o.namespace, "warmpod-pools/"+version)
	if err != nil {
		return nil, "", nil, err
	}
	cs, err := kubernetes.NewForConfig(cl.Config)
	if err != nil {
		return nil, "", nil, err
	}
	deps, err := cs.AppsV1().Deployments(cl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: poolapi.PoolSelector})
	if err != nil {
		return nil, "", nil, fmt.Errorf("list the pools of namespace %s: %w", cl.Namespace, err)
	}
	return cs, cl.Namespace, deps, nil
}
