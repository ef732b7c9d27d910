#!/bin/sh
# The file ACTIONS_RUNNER_CONTAINER_HOOKS names: the runner starts a hook
# by its extension (.sh: `bash -e FILE`, .js: node), so this shim execs
# the hook that sits beside it: warmpod-github-step, the per-step build
# (no Kubernetes client: it starts in a few milliseconds and hands every
# other command to warmpod-github), else warmpod-github itself. exec, so
# that the binary is the process the runner started: it gets the runner's
# stdin (the command) and its SIGINT/SIGTERM on cancel, which go to that
# process only. Its directory comes from the shell's own expansion, not
# $(dirname): that is a subshell and a process on every step; the test is
# a builtin.
case $0 in
*/*) d=${0%/*} ;;
*) d=. ;;
esac
if [ -x "$d/warmpod-github-step" ]; then
	exec "$d/warmpod-github-step" "$@"
fi
exec "$d/warmpod-github" "$@"
