package supervisor

import (
	"bytes"
	"os"
	"strconv"
)

// oomKills reads the container's OOM-kill counter under the cgroup file
// system mounted at root ("/sys/fs/cgroup" in a container): cgroup v2
// keeps it as "oom_kill N" in memory.events
// (Documentation/admin-guide/cgroup-v2.rst); cgroup v1 as "oom_kill N" in
// memory/memory.oom_control (Linux 4.13 and later,
// Documentation/admin-guide/cgroup-v1/memory.rst). 0 when neither is
// readable.
func oomKills(root string) int {
	for _, f := range []string{"memory.events", "memory/memory.oom_control"} {
		if b, err := os.ReadFile(root + "/" + f); err == nil {
			if n, ok := parseOOMKill(b); ok {
				return n
			}
		}
	}
	return 0
}

// parseOOMKill returns the value of the "oom_kill N" line of a cgroup
// flat-keyed file (memory.events or memory.oom_control).
func parseOOMKill(b []byte) (int, bool) {
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("oom_kill ")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n, err == nil
		}
	}
	return 0, false
}
