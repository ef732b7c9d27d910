package control

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

func startServer(t *testing.T, h Handler) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "control.sock")
	srv, err := Listen(path, h, initlog.Discard())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, srv.Close())
		require.NoError(t, <-done)
	})
	return path
}

func TestRoundTripAndPeer(t *testing.T) {
	var seen Peer
	path := startServer(t, func(_ context.Context, p Peer, r *Request) Response {
		seen = p
		return Response{OK: true, Job: r.Job, State: "busy"}
	})
	resp, err := Call(context.Background(), path, &Request{Op: OpJobEnd, Job: "j1"})
	require.NoError(t, err)
	require.True(t, resp.OK)
	require.Equal(t, "j1", resp.Job)
	require.Equal(t, os.Getpid(), seen.PID)
	require.Equal(t, os.Geteuid(), seen.UID)
}

func TestSocketModes(t *testing.T) {
	path := startServer(t, func(context.Context, Peer, *Request) Response { return Response{OK: true} })
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	dst, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o711), dst.Mode().Perm())
}

func TestBadRequests(t *testing.T) {
	path := startServer(t, func(context.Context, Peer, *Request) Response { return Response{OK: true} })
	tests := []struct {
		name, send, want string
	}{
		{"not json", "hello\n", `"code":65`},
		{"too long", strings.Repeat("x", MaxRequestBytes+10) + "\n", `"code":65`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("unix", path)
			require.NoError(t, err)
			defer c.Close()
			go func() { _, _ = c.Write([]byte(tt.send)) }()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err)
			require.Contains(t, line, tt.want)
		})
	}
}

func TestStaleSocketReplacedButNotAFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o600))
	_, err := Listen(file, nil, initlog.Discard())
	require.ErrorContains(t, err, "not a socket")
	b, _ := os.ReadFile(file)
	require.Equal(t, "keep", string(b))
}

func TestCallUnreachable(t *testing.T) {
	_, err := Call(context.Background(), filepath.Join(t.TempDir(), "none.sock"), &Request{Op: OpStatus})
	require.Error(t, err)
}

// A second warmpod started by mistake in a pod must not take over the
// socket of the one that runs: Listen refuses a socket that answers, and
// replaces one that does not.
func TestListenRefusesALiveSocket(t *testing.T) {
	path := startServer(t, func(context.Context, Peer, *Request) Response { return Response{OK: true} })
	_, err := Listen(path, nil, initlog.Discard())
	require.ErrorIs(t, err, ErrInUse)
	resp, err := Call(context.Background(), path, &Request{Op: OpStatus})
	require.NoError(t, err, "the first server still answers")
	require.True(t, resp.OK)

	// A stale socket (its server gone without removing it) is replaced.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false)
	require.NoError(t, ln.Close())
	srv, err := Listen(stale, nil, initlog.Discard())
	require.NoError(t, err)
	// Close removes the socket only while it is still its own.
	require.NoError(t, os.Remove(stale))
	other, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, srv.Close())
	_, err = os.Lstat(stale)
	require.NoError(t, err, "another server's socket is left alone")
}
