package probe

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

// startServer serves h on 127.0.0.1 with the production bounds, changed by
// opt when it is not nil, until the test ends; the cleanup checks that
// ServeListener's loop returned nil.
func startServer(t testing.TB, h *Handler, opt func(*server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serveOn(t, ln, h, opt)
}

func serveOn(t testing.TB, ln net.Listener, h *Handler, opt func(*server)) string {
	t.Helper()
	s := newServer(h, initlog.Discard())
	if opt != nil {
		opt(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return ln.Addr().String()
}

// newClient is a net/http client that never follows redirects (the
// server must not send any) and drops its idle connections at the end.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// dial opens a raw connection that fails the test's reads after 5 s.
func dial(t testing.TB, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	return c, bufio.NewReader(c)
}

func send(t testing.TB, c net.Conn, s string) {
	t.Helper()
	_, err := io.WriteString(c, s)
	require.NoError(t, err)
}

// readAnswer reads one response to a request with method from br and
// returns it with its body read.
func readAnswer(t testing.TB, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "HTTP/1.1", resp.Proto)
	require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.NotEmpty(t, resp.Header.Get("Content-Type"))
	require.NotEmpty(t, resp.Header.Get("Content-Length"))
	return resp, string(b)
}

// requireClosed asserts the server closed c: the next read is EOF (or a
// reset, after lingering has given up).
func requireClosed(t testing.TB, br *bufio.Reader) {
	t.Helper()
	b, err := br.ReadByte()
	require.Error(t, err, "more data after the last answer: %q", b)
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("want the connection closed, got %v", err)
	}
}

// Keep-alive through net/http's client: the second request reuses the
// first's connection.
func TestKeepAliveWithHTTPClient(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	c := newClient(t)
	reused := 0
	for i := 0; i < 5; i++ {
		trace := &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) {
			if ci.Reused {
				reused++
			}
		}}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+addr+"/readyz", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "ok", string(b))
		require.False(t, resp.Close, "the server asked to close a keep-alive connection")
	}
	require.Equal(t, 4, reused)
}

// The kubelet's prober: HTTP/1.1, Connection: close, one request per
// connection.
func TestKubeletStyle(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	c, br := dial(t, addr)
	send(t, c, kubeletRequest)
	resp, body := readAnswer(t, br, "GET")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "ok", body)
	require.True(t, resp.Close)
	requireClosed(t, br)
}

func TestHTTP10Closes(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	for _, in := range []string{"GET /livez HTTP/1.0\r\n\r\n", "GET /livez HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"} {
		c, br := dial(t, addr)
		send(t, c, in)
		resp, body := readAnswer(t, br, "GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "ok", body)
		require.True(t, resp.Close, "Connection: close")
		requireClosed(t, br)
	}
}

// Pipelined requests are answered in order, HEAD without a body, a small
// body is skipped, and the connection stays open until Connection: close.
func TestPipelining(t *testing.T) {
	ready := []Check{{Name: "state", Fn: func() error { return errors.New("busy") }}}
	addr := startServer(t, NewHandler(checks(), ready, nil, nil), nil)
	c, br := dial(t, addr)
	send(t, c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"+
		"HEAD /livez?verbose HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"+
		"GET /nope HTTP/1.1\nHost: x\n\n"+
		"GET /livez/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"+
		"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n") // after close: not answered
	want := []struct {
		method string
		code   int
		body   string
	}{
		{"GET", 200, "ok"},
		{"GET", 503, "[-]state failed: reason withheld\nreadyz check failed\n"},
		{"HEAD", 200, ""},
		{"POST", 405, "method not allowed\n"},
		{"GET", 404, "404 page not found\n"},
		{"GET", 200, "ok"},
	}
	for i, w := range want {
		resp, body := readAnswer(t, br, w.method)
		require.Equal(t, w.code, resp.StatusCode, "answer %d", i)
		require.Equal(t, w.body, body, "answer %d", i)
		require.Equal(t, i == len(want)-1, resp.Close, "answer %d", i)
	}
	requireClosed(t, br)
}

// Each malformed class gets its status, Connection: close, and the
// connection closed; the response is read whole (lingering keeps the
// kernel from resetting it away).
func TestMalformedOverTCP(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	for _, tt := range parseCases() {
		if tt.status == 0 {
			continue
		}
		t.Run(tt.name, func(t *testing.T) {
			c, br := dial(t, addr)
			send(t, c, tt.in)
			method := "GET"
			if strings.HasPrefix(tt.in, "HEAD ") {
				method = "HEAD"
			}
			resp, body := readAnswer(t, br, method)
			require.Equal(t, tt.status, resp.StatusCode, short(body))
			require.True(t, resp.Close)
			require.True(t, strings.HasPrefix(body, resp.Status), "body %q names the status %q", body, resp.Status)
			requireClosed(t, br)
		})
	}
}

// HEAD of a refused request has no body either.
func TestMalformedHEAD(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	c, br := dial(t, addr)
	send(t, c, "HEAD /livez HTTP/1.1\r\nHost: x\r\nbad line\r\n\r\n")
	resp, body := readAnswer(t, br, "HEAD")
	require.Equal(t, 400, resp.StatusCode)
	require.Empty(t, body)
	require.Positive(t, resp.ContentLength)
	requireClosed(t, br)
}

// A client that sends Expect: 100-continue waits for it before its body;
// the server answers at once and closes instead of waiting.
func TestExpectContinueAnsweredAtOnce(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	c, br := dial(t, addr)
	send(t, c, "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
	resp, _ := readAnswer(t, br, "POST")
	require.Equal(t, 405, resp.StatusCode)
	require.True(t, resp.Close)
	requireClosed(t, br)
}

// A large body is refused without being read, and the client still gets
// the answer.
func TestLargeBodyRefused(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), nil)
	c, br := dial(t, addr)
	send(t, c, "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"+strings.Repeat("x", 30000))
	resp, _ := readAnswer(t, br, "POST")
	require.Equal(t, 413, resp.StatusCode)
	requireClosed(t, br)
}

// Slowloris: a head that has not arrived headerTimeout after its first
// byte is cut, even while bytes keep trickling in.
func TestSlowHeadIsCut(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), func(s *server) { s.headerTimeout = 100 * time.Millisecond })
	c, br := dial(t, addr)
	start := time.Now()
	stop := make(chan struct{})
	var wrote atomic.Int64
	go func() {
		req := "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 200) + "\r\n\r\n"
		for i := 0; i < len(req); i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			if _, err := c.Write([]byte{req[i]}); err != nil {
				return
			}
			wrote.Add(1)
		}
	}()
	defer close(stop)
	requireClosed(t, br)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Less(t, wrote.Load(), int64(200), "the whole head went through")
}

// A silent connection is cut after headerTimeout, an idle keep-alive one
// after idleTimeout.
func TestSilentAndIdleConnectionsAreCut(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), func(s *server) {
		s.headerTimeout = 100 * time.Millisecond
		s.idleTimeout = 200 * time.Millisecond
	})
	_, br := dial(t, addr)
	requireClosed(t, br)

	c, br := dial(t, addr)
	send(t, c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, _ := readAnswer(t, br, "GET")
	require.Equal(t, 200, resp.StatusCode)
	start := time.Now()
	requireClosed(t, br)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond, "cut before idleTimeout")
}

// A client that does not read its answers blocks the server's write at
// most writeTimeout.
func TestUnreadAnswersTimeOut(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), func(s *server) { s.writeTimeout = 200 * time.Millisecond })
	c, _ := dial(t, addr)
	// Many verbose answers pipelined and never read fill both socket
	// buffers; the server's write times out and it closes.
	req := strings.Repeat("GET /livez?verbose HTTP/1.1\r\nHost: x\r\n\r\n", 50)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			return // the server closed: its write timed out
		}
	}
	t.Fatal("the server kept reading from a client that never reads")
}

// The connection cap: beyond maxConns a connection is closed at once, and
// when one goes a new one is served again.
func TestConnectionCap(t *testing.T) {
	addr := startServer(t, NewHandler(checks(), checks(), nil, nil), func(s *server) { s.maxConns = 3 })
	var open []net.Conn
	for i := 0; i < 3; i++ {
		c, br := dial(t, addr)
		send(t, c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ := readAnswer(t, br, "GET")
		require.Equal(t, 200, resp.StatusCode)
		open = append(open, c)
	}
	c, br := dial(t, addr)
	_, _ = io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
	requireClosed(t, br)

	require.NoError(t, open[0].Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(c, "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 5*time.Second, 20*time.Millisecond)
}

// When ctx is done ServeListener closes the listener and every
// connection, idle or half-way through a request, well within its 1 s
// drain, and returns nil.
func TestShutdownClosesConnections(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, NewHandler(checks(), checks(), nil, nil), nil) }()

	idle, idleR := dial(t, addr)
	send(t, idle, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, _ := readAnswer(t, idleR, "GET")
	require.Equal(t, 200, resp.StatusCode)
	half, halfR := dial(t, addr)
	send(t, half, "GET /livez HTTP/1.1\r\nHost:")
	_, silentR := dial(t, addr)
	time.Sleep(50 * time.Millisecond) // let the server accept them all

	start := time.Now()
	cancel()
	require.NoError(t, <-done)
	require.Less(t, time.Since(start), 900*time.Millisecond, "connections were not woken, the drain timeout closed them")
	for _, br := range []*bufio.Reader{idleR, halfR, silentR} {
		requireClosed(t, br)
	}
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "the listener is still open")
}

// fakeListener fails its first fails Accepts with err, then accepts from
// the real listener.
type fakeListener struct {
	net.Listener
	fails atomic.Int32
	err   error
}

func (l *fakeListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// Out of file descriptors is retried, with a backoff, not fatal.
func TestAcceptEMFILEIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &fakeListener{Listener: ln, err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}}
	fl.fails.Store(4)
	addr := serveOn(t, fl, NewHandler(checks(), checks(), nil, nil), nil)
	c, br := dial(t, addr)
	send(t, c, kubeletRequest)
	resp, _ := readAnswer(t, br, "GET")
	require.Equal(t, 200, resp.StatusCode)
}

// Any other accept error ends ServeListener with that error, and its
// connections are closed.
func TestAcceptErrorIsReturned(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	boom := errors.New("boom")
	fl := &fakeListener{Listener: ln, err: boom}
	gate := make(chan struct{})
	gated := &gatedListener{fakeListener: fl, gate: gate}
	done := make(chan error, 1)
	go func() {
		done <- ServeListener(context.Background(), gated, NewHandler(checks(), checks(), nil, nil), nil)
	}()
	c, br := dial(t, addr)
	send(t, c, "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, _ := readAnswer(t, br, "GET")
	require.Equal(t, 200, resp.StatusCode)
	fl.fails.Store(1)
	close(gate)
	select {
	case err := <-done:
		require.ErrorIs(t, err, boom)
	case <-time.After(5 * time.Second):
		t.Fatal("ServeListener did not return the accept error")
	}
	requireClosed(t, br)
}

// gatedListener accepts one real connection, then waits for gate before
// its next Accept (so the test chooses when the failure comes).
type gatedListener struct {
	*fakeListener
	gate   chan struct{}
	passed atomic.Bool
}

func (l *gatedListener) Accept() (net.Conn, error) {
	if l.passed.Swap(true) {
		<-l.gate
	}
	return l.fakeListener.Accept()
}

// The old API's nil log still works.
func TestServeListenerNilLog(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, NewHandler(checks(), nil, nil, nil), nil) }()
	c := newClient(t)
	resp, err := c.Get("http://" + ln.Addr().String() + "/livez")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "ok", string(b))
	cancel()
	require.NoError(t, <-done)
}

// The drain can start between an answer and the wait for the next request:
// the answer still goes out. (onAnswer starts it at exactly that point.)
func TestDrainBetweenAnswerAndFlush(t *testing.T) {
	s := newServer(NewHandler(checks(), checks(), nil, nil), nil)
	s.onAnswer = func(string, int) { s.draining.Store(true) }
	c := &memConn{in: bytes.NewReader([]byte("GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"))}
	s.handle(c)
	resp, body := readAnswer(t, bufio.NewReader(&c.out), "GET")
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "ok", body)
}

// Once draining, an answer carries Connection: close and the connection
// ends after it, even with more requests pipelined.
func TestDrainingAnswersClose(t *testing.T) {
	s := newServer(NewHandler(checks(), checks(), nil, nil), nil)
	s.draining.Store(true)
	get := "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
	c := &memConn{in: bytes.NewReader([]byte(get + get))}
	s.handle(c)
	br := bufio.NewReader(&c.out)
	resp, _ := readAnswer(t, br, "GET")
	require.Equal(t, 200, resp.StatusCode)
	require.True(t, resp.Close)
	_, err := br.ReadByte()
	require.ErrorIs(t, err, io.EOF)
}
