package supervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

// A job's TMPDIR is on disk under TmpDir when it can be made there, in the
// job's directory on the memory volume when not (no TmpDir, or one that
// cannot be written), and gone after the job in every case.
func TestJobTMPDIR(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tmpDir  func(t *testing.T) string
		onDisk  bool   // TMPDIR is under TmpDir
		warning string // in PID 1's log
	}{
		{name: "no TmpDir: the job directory", tmpDir: func(*testing.T) string { return "" }},
		{name: "TmpDir", tmpDir: func(t *testing.T) string { return t.TempDir() }, onDisk: true},
		{name: "TmpDir missing: the job directory, said",
			tmpDir:  func(t *testing.T) string { return filepath.Join(t.TempDir(), "absent") },
			warning: "job TMPDIR on the memory volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := tc.tmpDir(t)
				var logs bytes.Buffer
				p := startPodLog(t, Config{TmpDir: base}, initlog.New(&logs, initlog.LevelInfo, initlog.Text, time.Now))
				synctest.Wait()
				_, err := p.s.StartJob(spec("a"))
				require.NoError(t, err)
				info, err := p.s.JobEnv()
				require.NoError(t, err)
				var tmp string
				for _, kv := range info.Env {
					if v, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
						tmp = v
					}
				}
				if tc.onDisk {
					assert.Equal(t, base, filepath.Dir(tmp))
					assert.True(t, strings.HasPrefix(filepath.Base(tmp), "warmpod-job-a-"), tmp)
				} else {
					assert.Equal(t, filepath.Join(p.cfg.JobsDir, "a", "tmp"), tmp)
				}
				fi, err := os.Stat(tmp)
				require.NoError(t, err)
				assert.Equal(t, os.ModeDir|0o700, fi.Mode(), "the job's own directory")
				require.NoError(t, os.MkdirAll(filepath.Join(tmp, "d"), 0o700))
				require.NoError(t, os.WriteFile(filepath.Join(tmp, "d", "f"), []byte("job a's"), 0o600))
				if tc.warning != "" {
					assert.Contains(t, logs.String(), tc.warning)
				} else {
					assert.NotContains(t, logs.String(), "level=WARN")
				}

				_, err = p.s.EndJob("a", 0)
				require.NoError(t, err)
				_, err = os.Stat(tmp)
				assert.ErrorIs(t, err, os.ErrNotExist, "the job's TMPDIR is gone after the job")
				if tc.onDisk {
					left, err := os.ReadDir(base)
					require.NoError(t, err)
					assert.Empty(t, left, "nothing of the job is left in TmpDir")
				}
				assert.Equal(t, 143, p.stop())
			})
		})
	}
}
