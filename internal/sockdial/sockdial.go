// Package sockdial connects sockets without net.Dialer: a connect(2) with
// a deadline on a non-blocking socket, then net.FileConn. PID 1 only ever
// dials a unix socket path or an IP address (KUBERNETES_SERVICE_HOST is
// the API server's service IP), and net.Dialer links the whole name
// resolver (DNS client, /etc/hosts and resolv.conf parsing) into the
// binary whatever the address: about 0.2 MB of PID 1, measured.
package sockdial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// retryEvery is how often Unix retries a connect(2) that found the
// listener's backlog full (EAGAIN): a unix socket gives no readiness
// event for that.
const retryEvery = 5 * time.Millisecond

// Unix connects to the unix stream socket at path before ctx's deadline
// (or timeout, whichever is earlier; timeout <= 0 means ctx alone). A full
// backlog is retried until then. Errors: the connect(2) error wrapped in
// *net.OpError (ECONNREFUSED, ENOENT, EACCES, ...), os.ErrDeadlineExceeded
// when the time ran out, or ctx.Err().
func Unix(ctx context.Context, path string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	addr := &unix.SockaddrUnix{Name: path}
	for {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			return nil, opError("unix", path, err)
		}
		err = unix.Connect(fd, addr)
		if err == nil {
			return fileConn(fd, "unix:"+path)
		}
		_ = unix.Close(fd)
		if !errors.Is(err, unix.EAGAIN) {
			return nil, opError("unix", path, err)
		}
		t := time.NewTimer(retryEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, opError("unix", path, ctxErr(ctx))
		case <-t.C:
		}
	}
}

// TCP connects to ap before ctx's deadline (or timeout, whichever is
// earlier; timeout <= 0 means ctx alone). Errors: the connect(2) error
// wrapped in *net.OpError (ECONNREFUSED, ENETUNREACH, ...),
// os.ErrDeadlineExceeded when the time ran out, or ctx.Err().
func TCP(ctx context.Context, ap netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	if !ap.IsValid() {
		return nil, fmt.Errorf("sockdial: invalid address %v", ap)
	}
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	var (
		family int
		sa     unix.Sockaddr
	)
	if a := ap.Addr().Unmap(); a.Is4() {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: a.As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: a.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.IPPROTO_TCP)
	if err != nil {
		return nil, opError("tcp", ap.String(), err)
	}
	// The connection goes through the runtime's poller once it is a
	// net.Conn; the connect itself is waited for here, with poll(2) in
	// slices so ctx is noticed, since FileConn needs a connected socket.
	if err := unix.Connect(fd, sa); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		_ = unix.Close(fd)
		return nil, opError("tcp", ap.String(), err)
	} else if err != nil {
		if err := waitConnected(ctx, fd); err != nil {
			_ = unix.Close(fd)
			return nil, opError("tcp", ap.String(), err)
		}
	}
	return fileConn(fd, "tcp:"+ap.String())
}

// waitConnected waits until the non-blocking connect on fd has finished
// and returns its result (SO_ERROR), or the deadline's error.
func waitConnected(ctx context.Context, fd int) error {
	const slice = 50 * time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return ctxErr(ctx)
		}
		wait := slice
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(pfd, int(max(wait.Milliseconds(), 1)))
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n > 0 {
			soerr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
			if err != nil {
				return err
			}
			if soerr != 0 {
				return unix.Errno(soerr)
			}
			return nil
		}
	}
}

// fileConn turns the connected socket fd into a net.Conn (the runtime's
// poller takes a duplicate; fd is closed here).
func fileConn(fd int, name string) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), name)
	c, err := net.FileConn(f)
	_ = f.Close()
	return c, err
}

func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}

// ctxErr maps an expired deadline to os.ErrDeadlineExceeded, as net's own
// dialer reports a timeout (it satisfies net.Error's Timeout()).
func ctxErr(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return os.ErrDeadlineExceeded
	}
	return ctx.Err()
}

func opError(network, addr string, err error) error {
	return &net.OpError{Op: "dial", Net: network, Addr: strAddr{network, addr}, Err: err}
}

// strAddr names the far end in errors without resolving anything.
type strAddr struct{ network, addr string }

func (a strAddr) Network() string { return a.network }
func (a strAddr) String() string  { return a.addr }
