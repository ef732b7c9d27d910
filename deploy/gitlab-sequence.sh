#!/usr/bin/env bash
# gitlab-sequence.sh POD [NAMESPACE] — drive a warm warmpod pod through one job the way a
# GitLab-style executor does, with nothing but `kubectl exec`:
#   claim (token + variables on stdin) → upload the stage script → run it detached →
#   stream its log by byte offset, resuming after any broken stream → read the outcome → release.
# The stage's outcome comes from PID 1 (job wait), never from a stream closing.
set -euo pipefail
POD=${1:?usage: gitlab-sequence.sh POD [NAMESPACE]}
NS=${2:-default}
K() { kubectl -n "$NS" exec "$@"; }
ID=job-$RANDOM$RANDOM
TOKEN=${CI_JOB_TOKEN_FOR_DEMO:-glcbt-demo-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')}

# 1. Claim the pod. The token travels on stdin, never in argv. 75 = busy/refused: pick another pod.
printf '{"id":"%s","nonce":"n1","token":"%s","timeout":"30m","lease_ttl":"60s","variables":[{"key":"GREETING","value":"hello from %s"},{"key":"CONFIG","value":"debug: true\\n","file":true}]}\n' \
  "$ID" "$TOKEN" "$ID" | K -i "$POD" -- warmpod job start

# 2. Upload the stage script atomically (size and digest checked; a cut upload leaves nothing).
SCRIPT=$(mktemp)
trap 'rm -f "$SCRIPT"' EXIT
cat > "$SCRIPT" <<'SH'
set -e
echo "$GREETING"
echo "config file: $CONFIG: $(cat "$CONFIG")"
echo "token is ${#CI_JOB_TOKEN} characters long"
sleep 600 >/dev/null 2>&1 &   # a leftover: it does not hold the stage open, job end kills it
exit 3
SH
K -i "$POD" -- warmpod job put /tmp/build.sh --size "$(wc -c < "$SCRIPT")" \
  --sha256 "$(sha256sum "$SCRIPT" | cut -d' ' -f1)" --mode 0755 < "$SCRIPT"

# 3. Start the stage under PID 1: it survives this exec session.
K "$POD" -- warmpod job run --job "$ID" --detach --stage build -- sh /tmp/build.sh

# 4. Stream the log by offset until the stage's marker line; resume after any error.
OFF=0
until K "$POD" -- warmpod job wait --job "$ID" --stage build --timeout 1s >/dev/null 2>&1; do
  while IFS= read -r rec; do
    OFF=${rec%% *}; printf '%s\n' "${rec#* }"
  done < <(K "$POD" -- warmpod job logs --job "$ID" --offset "$OFF" || true)
  sleep 0.5
done
K "$POD" -- warmpod job logs --job "$ID" --offset "$OFF" | cut -d' ' -f2-

# 5. The outcome, as PID 1 reaped it.
K "$POD" -- warmpod job status --job "$ID" --stage build

# 6. Release: every process of the job is killed, the token wiped, the files removed.
K "$POD" -- warmpod job end --job "$ID"
