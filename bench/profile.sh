#!/usr/bin/env bash
# bench/profile.sh — profiles behind the targets warmpod misses in
# bench/results.md (root; not part of `make bench`; ~5 min). Writes text
# summaries to bench/profiles/:
#   control.md       signal / reaping / start-up / idle with a minimal Go init
#                    (bench/cmd/goinit) as an extra column: the Go runtime's share
#   pipe-perf.txt    perf profile of warmpod --stdio pipe moving 256 MiB
#   pty-perf.txt     perf profile of warmpod --stdio pty moving 16 MiB
#   reap-perf.txt    perf profile of warmpod reaping 3 × 10,000 zombies
#   size.txt         warmpod's text/rodata/data symbol bytes by package
set -eu  # no pipefail: perf report | head closes pipes early
cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=bench/profiles
mkdir -p "$OUT" bin/bench
command -v perf >/dev/null || { echo "profile: perf missing (apt-get install linux-perf)" >&2; exit 1; }
"${MAKE:-make}" --no-print-directory build
for h in orphans sigstamp ptyrelay goinit benchrun; do
  (cd bench && CGO_ENABLED=0 "$GO" build -trimpath -o "../bin/bench/$h" "./cmd/$h")
done
# Same code as bin/warmpod, with symbols (perf needs them).
CGO_ENABLED=0 "$GO" build -trimpath -o bin/bench/warmpod.sym ./cmd/warmpod
W=$PWD/bin/bench/warmpod.sym
TMP=$(mktemp -d /tmp/warmpod-profile.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

echo "== control run (go-min column)"
bin/bench/benchrun -warmpod bin/warmpod -control bin/bench/goinit -only idle,startup,reap,signal \
  -idle-window 30s -startup-runs 50 -reap-runs 5 -signal-runs 100 -min-signal-runs 100 \
  -out "$TMP/control" -root . >/dev/null
cp "$TMP/control/results.md" "$OUT/control.md"

wp() { echo "unshare --pid --fork --mount-proc --kill-child $W --exit-with-command --probe-addr= --control-socket $TMP/c.sock --jobs-dir $TMP/jobs $*"; }
summary() { # perf.data title
  {
    echo "# $2"
    echo "# $(date -u +%FT%TZ), load $(cat /proc/loadavg), $(nproc) CPUs, kernel $(uname -r)"
    echo; echo "## share of samples by command"
    perf report -i "$1" --no-children --sort comm --stdio -g none 2>/dev/null | grep '%' | head -8
    echo; echo "## warmpod: self time by symbol (% of warmpod's samples)"
    perf report -i "$1" --comm warmpod.sym --no-children --percentage relative --sort dso,sym --stdio -g none 2>/dev/null | grep '%' | sort -rn | head -25
    echo; echo "## warmpod: inclusive time (children) by symbol"
    perf report -i "$1" --comm warmpod.sym --children --percentage relative --sort sym --stdio -g none 2>/dev/null | grep '%' | head -40
  }
}
head -c $((192 << 20)) /dev/urandom | base64 -w 76 > "$TMP/in.txt"   # 256 MiB of base64 lines
head -c $((12 << 20)) /dev/urandom | base64 -w 76 > "$TMP/in16.txt"  # 16 MiB

echo "== perf: pipe"
perf record -q -e cpu-clock -F 2000 -g -o "$TMP/pipe.perf" -- sh -c "cat $TMP/in.txt | $(wp --stdio pipe -- /bin/sh -c cat) 2>/dev/null | cat >/dev/null"
summary "$TMP/pipe.perf" "warmpod --stdio pipe: 256 MiB from a pipe through sh -c cat" > "$OUT/pipe-perf.txt"
echo "== perf: pty"
perf record -q -e cpu-clock -F 2000 -g -o "$TMP/pty.perf" -- sh -c "cat $TMP/in16.txt | $(wp --stdio pty -- /bin/sh -c cat) 2>/dev/null | cat >/dev/null"
summary "$TMP/pty.perf" "warmpod --stdio pty: 16 MiB from a pipe through sh -c cat" > "$OUT/pty-perf.txt"
{ echo; echo "## kernel: self time by symbol, all commands"; perf report -i "$TMP/pty.perf" --no-children --sort sym --stdio -g none 2>/dev/null | grep '%' | head -20; } >> "$OUT/pty-perf.txt"
echo "== perf: reap"
perf record -q -e cpu-clock -F 4000 -g -o "$TMP/reap.perf" -- sh -c "for i in 1 2 3; do $(wp -- "$PWD/bin/bench/orphans" watch -n 10000) 2>/dev/null; done" > "$TMP/reap.json"
summary "$TMP/reap.perf" "warmpod reaping 3 x 10,000 zombies handed over at once" > "$OUT/reap-perf.txt"
{ echo; echo "## runs"; cat "$TMP/reap.json"; } >> "$OUT/reap-perf.txt"

echo "== size"
bin/bench/benchrun -only size -size-table "$OUT/size.txt" -warmpod bin/warmpod -out "$TMP/size" -root . >/dev/null
echo "profiles in $OUT/"
