#!/bin/sh
# The driver as ../shared/gitlab-runner/bench-k8s-vs-driver.sh calls it for
# its "warm" variant (make bench-k8s-anchor). That script passes
# --pools deploy/kube-e2e/pool.yaml, whose template takes warmpod's config
# hash from pod-template-hash, which only the cluster knows; the driver
# refuses such a manifest in file mode. So this drops --pools FILE and the
# driver reads the pool Deployments from the namespace, as deploy/ and
# make e2e-kube wire it. Everything else is passed on unchanged.
# The directory comes from $0 by parameter expansion, not $(dirname): the
# runner calls this for every stage, and a subshell and a dirname process
# each time are a fork and an exec more than the job needs.
if [ "$1" = --pools ]; then shift 2; fi
case $0 in
*/*) here=${0%/*} ;;
*) here=. ;;
esac
exec "$here/../bin/warmpod-gitlab" "$@"
