package sockdial

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoOnce accepts one connection on ln and echoes one line back.
func echoOnce(t *testing.T, ln net.Listener) {
	t.Helper()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 5)
		if _, err := io.ReadFull(c, b); err == nil {
			_, _ = c.Write(b)
		}
	}()
}

func roundTrip(t *testing.T, c net.Conn) {
	t.Helper()
	defer c.Close()
	_, err := c.Write([]byte("hello"))
	require.NoError(t, err)
	b := make([]byte, 5)
	_, err = io.ReadFull(c, b)
	require.NoError(t, err)
	require.Equal(t, "hello", string(b))
}

// rawListener listens on sa with a backlog of 0 and never accepts, so
// its queue fills after a connection or two.
func rawListener(t *testing.T, family int, sa unix.Sockaddr) int {
	t.Helper()
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Close(fd) })
	require.NoError(t, unix.Bind(fd, sa))
	require.NoError(t, unix.Listen(fd, 0))
	return fd
}

func TestUnix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer ln.Close()
	echoOnce(t, ln)
	c, err := Unix(context.Background(), path, time.Second)
	require.NoError(t, err)
	roundTrip(t, c)

	for _, tc := range []struct {
		name string
		path string
		want error
	}{
		{"missing", filepath.Join(dir, "none.sock"), unix.ENOENT},
		{"not a socket", func() string { p := filepath.Join(dir, "f"); _ = os.WriteFile(p, nil, 0o600); return p }(), unix.ECONNREFUSED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unix(context.Background(), tc.path, time.Second)
			require.ErrorIs(t, err, tc.want)
			var op *net.OpError
			require.ErrorAs(t, err, &op)
		})
	}
}

// A listener whose backlog is full makes connect(2) fail with EAGAIN:
// Unix retries until its deadline, then says it timed out.
func TestUnixFullBacklogTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.sock")
	rawListener(t, unix.AF_UNIX, &unix.SockaddrUnix{Name: path})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	var err error
	for range 8 {
		var c net.Conn
		if c, err = Unix(context.Background(), path, 50*time.Millisecond); err != nil {
			break
		}
		held = append(held, c)
	}
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "after %d connections", len(held))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout())

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = Unix(ctx, path, 0)
	require.ErrorIs(t, err, context.Canceled)
}

func TestTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	echoOnce(t, ln)
	ap := ln.Addr().(*net.TCPAddr).AddrPort()
	c, err := TCP(context.Background(), ap, time.Second)
	require.NoError(t, err)
	roundTrip(t, c)

	// A port nothing listens on: the listener's own, once closed.
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln2.Addr().(*net.TCPAddr).AddrPort()
	require.NoError(t, ln2.Close())
	_, err = TCP(context.Background(), closed, time.Second)
	require.ErrorIs(t, err, unix.ECONNREFUSED)

	_, err = TCP(context.Background(), netip.AddrPort{}, time.Second)
	require.Error(t, err)
}

// A TCP listener whose accept queue is full drops the SYN: the connect
// hangs until the deadline.
func TestTCPTimesOut(t *testing.T) {
	fd := rawListener(t, unix.AF_INET, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	sa, err := unix.Getsockname(fd)
	require.NoError(t, err)
	ap := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(sa.(*unix.SockaddrInet4).Port))
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	for range 8 {
		c, err := TCP(context.Background(), ap, 200*time.Millisecond)
		if err != nil {
			require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "after %d connections: %v", len(held), err)
			return
		}
		held = append(held, c)
	}
	t.Skipf("the kernel accepted %d connections on a backlog of 0 without a timeout", len(held))
}
