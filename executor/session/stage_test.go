package session

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/warmpod/warmpod/poolapi"
)

// failingCluster's Exec fails with err every time, and counts the calls.
type failingCluster struct {
	Cluster
	err   error
	calls int
}

func (f *failingCluster) Exec(context.Context, poolapi.Pod, []string, io.Reader, io.Writer, io.Writer) (int, error) {
	f.calls++
	return -1, f.err
}

// A *SystemError from the Cluster's Exec (an exec that never began: the
// hook's client could not be set up when the multiplexer was not there)
// ends RunStage at once with that error; only a broken stream is tried
// again.
func TestRunStageRetriesOnlyABrokenStream(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name    string
		err     error
		retries int
		calls   int
		msg     string
	}{
		{"no client", Errorf("kubeconfig: no configuration"), 5, 1, "kubeconfig: no configuration"},
		{"a broken stream", errors.New("connection reset"), 1, 2, "failed 2 times: connection reset"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := &failingCluster{err: tc.err}
			c := &Session{Cluster: fc, Log: io.Discard, MaxStreamRetries: tc.retries}
			_, err := c.RunStage(context.Background(), poolapi.Pod{Name: "p", Bin: "/w/warmpod"}, "j1", "s1", []byte("true\n"), io.Discard, io.Discard, nil)
			require.Error(t, err)
			var se *SystemError
			assert.ErrorAs(t, err, &se)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Equal(t, tc.calls, fc.calls, "execs")
		})
	}
}

// argvCluster answers every exec with a stage's end, and keeps the argv.
type argvCluster struct {
	Cluster
	argv []string
}

func (a *argvCluster) Exec(_ context.Context, _ poolapi.Pod, argv []string, _ io.Reader, _, stderr io.Writer) (int, error) {
	a.argv = argv
	_, err := io.WriteString(stderr, `{"stage":"s1","running":false,"exit_code":0,"started":"2026-12-03T00:00:00Z","log_start":0,"log_end":0}`+"\n")
	return 0, err
}

// RunStage asks for Core.Shell's interpreter (job stage --shell) when it
// is set, and leaves the pod's choice (auto) otherwise; the other
// arguments keep their places.
func TestRunStageShell(t *testing.T) {
	tests := []struct {
		shell string
		tail  []string
	}{
		{"", []string{"--offset", "0"}},
		{"sh", []string{"--offset", "0", "--shell", "sh"}},
	}
	for _, tc := range tests {
		t.Run("shell "+tc.shell, func(t *testing.T) {
			ac := &argvCluster{}
			c := &Session{Cluster: ac, Log: io.Discard, Shell: tc.shell}
			_, err := c.RunStage(context.Background(), poolapi.Pod{Name: "p", Bin: "/w/warmpod"}, "j1", "s1", []byte("true\n"), io.Discard, io.Discard, nil)
			require.NoError(t, err)
			require.Greater(t, len(ac.argv), 7)
			assert.Equal(t, []string{"/w/warmpod", "job", "stage", "--job", "j1", "--stage", "s1"}, ac.argv[:7])
			assert.Equal(t, tc.tail, ac.argv[len(ac.argv)-len(tc.tail):])
			assert.Equal(t, tc.shell != "", slices.Contains(ac.argv, "--shell"))
		})
	}
}
