#!/bin/sh
# The file ACTIONS_RUNNER_CONTAINER_HOOKS names: the runner starts a hook
# by its extension (.sh: `bash -e FILE`, .js: node), so this shim execs the
# warmpod-github binary that sits beside it. exec, so that the binary is
# the process the runner started: it gets the runner's stdin (the command)
# and its SIGINT/SIGTERM on cancel, which go to that process only. Its
# directory comes from the shell's own expansion, not $(dirname): that is
# a subshell and a process on every step.
case $0 in
*/*) exec "${0%/*}/warmpod-github" "$@" ;;
esac
exec ./warmpod-github "$@"
