#!/usr/bin/env bash
# demo.sh BIN — the whole warmpod cycle in a real runc container:
# warm → job start with a token → a script sees it → job end → idle exit.
# Needs root, runc and busybox-static (`make demo` installs them).
set -euo pipefail
BIN=${1:?usage: demo.sh path/to/warmpod}
IDLE=${IDLE:-5s}
ID=warmpod-demo-$$
WORK=$(mktemp -d /tmp/warmpod-demo.XXXXXX)
PORT=${PORT:-19898}

cleanup() {
  runc kill "$ID" KILL >/dev/null 2>&1 || true
  runc delete -f "$ID" >/dev/null 2>&1 || true
  exec 3>&- 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "rootfs: busybox-static + warmpod in $WORK/bundle"
mkdir -p "$WORK/bundle/rootfs"/{bin,usr/local/bin,proc,sys,dev,tmp,run,etc}
cp /bin/busybox "$WORK/bundle/rootfs/bin/busybox"
for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$WORK/bundle/rootfs/bin/$a"; done
cp "$BIN" "$WORK/bundle/rootfs/usr/local/bin/warmpod"
echo 'root:x:0:0:root:/:/bin/sh' > "$WORK/bundle/rootfs/etc/passwd"
chmod 1777 "$WORK/bundle/rootfs/tmp"
(cd "$WORK/bundle" && runc spec)
# warmpod as PID 1, no terminal, host network so the probe port is reachable on 127.0.0.1.
python3 - "$WORK/bundle/config.json" "$IDLE" "$PORT" <<'PY'
import json, sys
p, idle, port = sys.argv[1], sys.argv[2], sys.argv[3]
c = json.load(open(p))
c["process"]["terminal"] = False
c["process"]["args"] = ["/usr/local/bin/warmpod", "--stdio", "pipe", "--idle-timeout", idle, "--max-jobs", "0",
                        "--probe-addr", "127.0.0.1:" + port]
c["process"]["env"] = ["PATH=/usr/local/bin:/bin", "HOME=/"]
c["root"]["readonly"] = False
c["linux"]["namespaces"] = [n for n in c["linux"]["namespaces"] if n["type"] != "network"]
c["mounts"].append({"destination": "/run", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=755"]})
json.dump(c, open(p, "w"), indent=1)
PY

say "runc run: warmpod becomes PID 1 (stdin from a fifo, like kubectl attach)"
mkfifo "$WORK/stdin"
T0=$(date +%s.%N)
runc run --bundle "$WORK/bundle" "$ID" < "$WORK/stdin" > "$WORK/stdout" 2> "$WORK/stderr" &
RUNC=$!
exec 3> "$WORK/stdin"
for i in $(seq 1000); do curl -fsS "127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break; kill -0 $RUNC 2>/dev/null || { cat "$WORK/stderr"; exit 1; }; sleep 0.01; done
awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN{printf "ready after %.0f ms: /readyz 200\n", (a-b)*1000}'
runc exec "$ID" ps -o pid,ppid,args

say "job start (token and variables on stdin, never in argv)"
echo '{"id":"demo-1","token":"glcbt-demo-s3cr3t","timeout":"10m","variables":[{"key":"GREETING","value":"hello from job 1"}]}' |
  runc exec "$ID" warmpod job start
printf 'readyz while busy: '; curl -s -o /dev/null -w '%{http_code}\n' "127.0.0.1:$PORT/readyz"
runc exec "$ID" warmpod status

say "a script runs inside the job's environment"
runc exec "$ID" warmpod job run -- sh -c 'echo "$GREETING; token has ${#CI_JOB_TOKEN} chars"; sleep 300 >/dev/null 2>&1 &'
echo 'echo "attached stdin sees the job too: GREETING=$GREETING"' >&3
sleep 0.3; tail -n 1 "$WORK/stdout"
runc exec "$ID" ps -o pid,ppid,args

say "job end: the left-over sleep is killed, the token wiped, a fresh idle shell started"
runc exec "$ID" warmpod job end
runc exec "$ID" ps -o pid,ppid,args
printf 'job env now: '; runc exec "$ID" warmpod job env || echo "(exit $? — no job)"
printf 'readyz: '; curl -s -o /dev/null -w '%{http_code}\n' "127.0.0.1:$PORT/readyz"

say "no activity: the container drains and exits on its idle deadline ($IDLE)"
set +e
wait "$RUNC"; CODE=$?
set -e
echo "container exited with status $CODE"
say "warmpod's log (stderr)"
cat "$WORK/stderr"
