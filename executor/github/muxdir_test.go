package github

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/executor/fake"
	"github.com/warmpod/warmpod/executor/mux"
	"github.com/warmpod/warmpod/poolapi"
)

// A state directory the multiplexer cannot use (here: mode 0755) is a
// ::warning:: of prepare_job, shown at the default level, with its fix;
// the job goes on with one exec per call.
func TestPrepareJobWarnsOfAnUnusableStateDirectory(t *testing.T) {
	r := newRunner(t)
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o755))
	f := &fakeCluster{Cluster: fake.Cluster{Warm: []poolapi.Pod{{Name: "w1", UID: "u1", Bin: "/warmpod/warmpod", Warm: true, Pool: "job"}}}}
	h, out, errb := r.hook(f)
	// A multiplexer binary that never listens: only the directory matters.
	h.Mux = &mux.Launcher{Argv: []string{"/bin/true"}, Dir: dir}
	code, resp := r.call(h, CmdPrepareJob, PrepareJobArgs{Container: &Container{Image: "localhost/hooks/job:v1"}, Services: []Container{}}, nil, nil)
	require.Equal(t, 0, code, "stdout %s stderr %s", out, errb)
	require.NotNil(t, resp)
	var warnings []string
	for _, l := range strings.Split(errb.String(), "\n") {
		if strings.HasPrefix(l, "::warning::") && strings.Contains(l, "multiplexer") {
			warnings = append(warnings, l)
		}
	}
	require.Len(t, warnings, 1, "once: %s", errb)
	assert.Contains(t, warnings[0], "::warning::warmpod: no multiplexer for the job")
	assert.Contains(t, warnings[0], "fix: chmod 700 "+dir)
	assert.NotContains(t, out.String(), "no multiplexer", "not (only) a ::debug:: line")
}
