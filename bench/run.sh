#!/usr/bin/env bash
# bench/run.sh [benchrun flags] — what `make bench` runs (as root): install the
# anchor inits and tools when missing, build warmpod and the bench helpers, run
# every metric (bench/cmd/benchrun) and the Go micro-benchmarks, and write
# bench/results.md, bench/results.json and bench/micro.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$(date +%s)
LOAD_AT_START=$(cat /proc/loadavg)
GO=${GO:-go}
MAKE=${MAKE:-make}

if [ "$(id -u)" != 0 ]; then
  echo "bench: must run as root (unshare, runc)" >&2
  exit 1
fi
missing=""
for p in tini dumb-init catatonit hyperfine runc busybox-static; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "bench: apt-get install -y$missing"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
fi
command -v file >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq file >/dev/null; }

"$MAKE" --no-print-directory build
mkdir -p bin/bench
for h in orphans sigstamp ptyrelay; do
  (cd bench && CGO_ENABLED=0 "$GO" build -trimpath -o "../bin/bench/$h" "./cmd/$h")
done
# bench/ is its own module: the product's go test ./... and go vet ./...
# never compile it.
(cd bench && "$GO" vet ./... && "$GO" build -o ../bin/bench/benchrun ./cmd/benchrun)

bin/bench/benchrun -warmpod bin/warmpod -out bench -root . \
  -load-at-start "$LOAD_AT_START" -make-start "$START" "$@"
echo "bench: make bench took $(( $(date +%s) - START )) s; results in bench/results.md, bench/results.json, bench/micro.txt"
# The GitLab Runner figures come from the real cluster (make bench-kube), kept
# in their own file; carry them into results.md so it stays the one summary.
if [ -s bench/gitlab-kube.md ]; then
  printf '\n## GitLab Runner on warm pods vs cold pods (make bench-kube, real cluster; bench/gitlab-kube.md)\n\n' >> bench/results.md
  cat bench/gitlab-kube.md >> bench/results.md
fi
# The trail (hand-maintained: before → after figures of each change) would
# be lost at every run otherwise; carry it in the same way.
if [ -s bench/trail.md ]; then
  printf '\n## Trail: before → after per change (hand-maintained; bench/trail.md)\n\n' >> bench/results.md
  cat bench/trail.md >> bench/results.md
fi
