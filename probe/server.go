package probe

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/warmpod/warmpod/internal/initlog"
)

// Bounds of ServeListener. A slow or hostile client holds a connection for
// at most headerTimeout per request and idleTimeout between requests, and
// at most maxConns connections are open, each with a 4 KiB read buffer
// and a goroutine.
const (
	// headerTimeout is the time from a request's first byte (or the
	// connection's start) until its whole head, and any small body, are
	// read; a slowloris client is cut off after it.
	headerTimeout = 2 * time.Second
	// idleTimeout is how long a keep-alive connection may wait for its
	// next request. Go's client reuses idle connections for 90 s; the
	// kubelet does not keep them at all.
	idleTimeout = 30 * time.Second
	// writeTimeout bounds writing one batch of responses.
	writeTimeout = 5 * time.Second
	// drainTimeout is how long ServeListener lets answers in progress
	// finish once its context is done, before it closes the connections.
	drainTimeout = time.Second
	// lingerTimeout bounds reading what a client still sends after a
	// refused request, so that our close does not reset the connection
	// before the client has read the refusal (see linger).
	lingerTimeout = 500 * time.Millisecond
	// maxLinger is the most bytes read and discarded while lingering.
	maxLinger = 64 << 10
	// maxConns caps open connections. The kubelet opens one per probe,
	// a probe period is seconds, and a probe takes microseconds, so a
	// handful are open at once; the cap is for floods. A connection
	// beyond it is closed at once, unread.
	maxConns = 128
	// maxPending is how many bytes of answers to pipelined requests are
	// kept before they are written even though more requests are
	// already read.
	maxPending = 4 << 10
)

// ServeListener serves h on ln until ctx is done (bind it to ":9898", every
// address: the kubelet probes the pod IP, so 127.0.0.1 alone would fail
// every probe). It speaks HTTP/1.1 (RFC 9112) with keep-alive,
// pipelining and HTTP/1.0; it sends only 200, 503 and errors, never a
// redirect (the kubelet counts 200–399 as success, so a redirect would
// pass a failing probe).
//
// Bounds: a request head is at most 4 KiB (414 or 431 beyond) and must
// arrive within 2 s of its first byte; a keep-alive connection waits at
// most 30 s for its next request; writing answers times out after 5 s;
// a request body up to 4 KiB with a Content-Length is read and thrown
// away, a larger one is 413 and a chunked one 501; at most 128
// connections are open, more are closed at once. Malformed requests get
// a 4xx (a 505 for a version other than 1.x) and the connection is
// closed; they are logged at debug, without their headers, which may
// carry tokens.
//
// A temporary accept error (out of file descriptors) is retried with a
// backoff of 5 ms doubling to 1 s. When ctx is done, ServeListener closes
// ln, lets answers in progress finish for up to 1 s, closes every
// connection and returns nil; on another accept error it closes them the
// same way and returns that error. A nil log discards.
func ServeListener(ctx context.Context, ln net.Listener, h *Handler, log *initlog.Logger) error {
	return newServer(h, log).serve(ctx, ln)
}

// server is one ServeListener: its bounds (tests shorten them) and the
// connections it has open.
type server struct {
	h   *Handler
	log *initlog.Logger

	headerTimeout, idleTimeout, writeTimeout time.Duration
	drainTimeout, lingerTimeout              time.Duration
	maxConns                                 int

	// onAnswer, when set (tests and fuzzing only), is told each answer
	// as it is queued for writing: the request's method ("" when the
	// request line could not be parsed) and the status.
	onAnswer func(method string, status int)

	// draining is set when serve stops: answers then carry
	// Connection: close and connections end after them.
	draining atomic.Bool

	// bufs holds *connBuf between connections: the kubelet opens one
	// per probe, and 4.5 KiB of buffers each time is garbage for nothing.
	bufs sync.Pool

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open connections, for shutdown
	closed bool                  // no more connections are tracked
	wg     sync.WaitGroup        // one per tracked connection
}

func newServer(h *Handler, log *initlog.Logger) *server {
	if log == nil {
		log = initlog.Discard()
	}
	return &server{
		h: h, log: log,
		headerTimeout: headerTimeout, idleTimeout: idleTimeout, writeTimeout: writeTimeout,
		drainTimeout: drainTimeout, lingerTimeout: lingerTimeout, maxConns: maxConns,
		conns: make(map[net.Conn]struct{}),
	}
}

func (s *server) serve(ctx context.Context, ln net.Listener) error {
	// Closing the listener is what wakes a blocked Accept.
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			_ = ln.Close()
		case <-stop:
		}
	}()
	err := s.acceptLoop(ctx, ln)
	close(stop)
	<-watched
	_ = ln.Close()
	s.shutdown()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (s *server) acceptLoop(ctx context.Context, ln net.Listener) error {
	var backoff time.Duration
	capped := false // log the cap once per streak of refused connections
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !temporary(err) {
				return err
			}
			if backoff == 0 {
				backoff = 5 * time.Millisecond
				s.log.Warn("probe accept failed, retrying", "error", err)
			} else {
				backoff = min(2*backoff, time.Second)
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		if !s.track(c) {
			if !capped {
				s.log.Debug("probe connection cap reached, closing new connections", "max", s.maxConns)
			}
			capped = true
			_ = c.Close()
			continue
		}
		capped = false
		go s.serveConn(c)
	}
}

// temporary reports whether an accept error may go away by itself: out
// of file descriptors or memory, a connection aborted before it was
// accepted, or a net.Error timeout.
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// track registers c, or reports false when the cap is reached or the
// server is stopping.
func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= s.maxConns {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *server) untrack(c net.Conn) {
	_ = c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// shutdown stops every connection: idle ones and those reading a request
// at once (a read deadline in the past wakes them), those writing an
// answer once it is written, and after drainTimeout all that are left.
func (s *server) shutdown() {
	s.draining.Store(true)
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		_ = c.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	gone := make(chan struct{})
	go func() { s.wg.Wait(); close(gone) }()
	t := time.NewTimer(s.drainTimeout)
	defer t.Stop()
	select {
	case <-gone:
		return
	case <-t.C:
	}
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	<-gone
}

// conn is one client connection. Answers are queued in out and written
// just before the connection is read again (or closed), so that answers
// to pipelined requests go out together, in order, and nothing is left
// unwritten while the server waits for the client.
type conn struct {
	net.Conn
	s   *server
	out []byte
}

// Read writes the queued answers, then reads. bufio.Reader calls it only
// when its buffer is empty, that is, only when the server is about to wait
// for the client.
func (c *conn) Read(p []byte) (int, error) {
	if err := c.flush(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// connBuf is a connection's read buffer (maxHead bytes, as readRequest
// needs) and output buffer, kept for the next connection.
type connBuf struct {
	br  *bufio.Reader
	out []byte
}

func (c *conn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.s.writeTimeout))
	_, err := c.Conn.Write(c.out)
	c.out = c.out[:0]
	return err
}

func (s *server) serveConn(nc net.Conn) {
	defer s.untrack(nc)
	s.handle(nc)
}

// handle answers the requests on nc until it ends, a request is refused,
// or one asks to close. It does not close nc.
func (s *server) handle(nc net.Conn) {
	cb, _ := s.bufs.Get().(*connBuf)
	if cb == nil {
		cb = &connBuf{br: bufio.NewReaderSize(nil, maxHead), out: make([]byte, 0, 512)}
	}
	c := &conn{Conn: nc, s: s, out: cb.out[:0]}
	br := cb.br
	br.Reset(c)
	defer func() {
		// Whatever way the loop ends, answers already queued go out
		// (the drain may end a connection between an answer and its
		// flush); then the buffers go back, unless pipelining grew
		// the output one.
		_ = c.flush()
		br.Reset(nil)
		if cap(c.out) <= 2*maxPending {
			cb.out = c.out[:0]
			s.bufs.Put(cb)
		}
	}()
	for first := true; ; first = false {
		if !first && br.Buffered() == 0 {
			// Idle: wait for the next request's first byte. The
			// draining check comes after the deadline is set, so
			// that shutdown's deadline in the past cannot be lost
			// (the drain timeout backs this up).
			_ = nc.SetReadDeadline(time.Now().Add(s.idleTimeout))
			if s.draining.Load() {
				return
			}
			if _, err := br.Peek(1); err != nil {
				return
			}
		}
		_ = nc.SetReadDeadline(time.Now().Add(s.headerTimeout))
		req, err := readRequest(br)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) {
				// EOF, a deadline, a reset: nothing to answer,
				// or no one to answer to.
				return
			}
			if s.log.Enabled(initlog.LevelDebug) {
				s.log.Debug("probe request refused", "status", re.status, "reason", re.reason, "remote", nc.RemoteAddr().String())
			}
			s.queue(c, req.method, answer{status: re.status, contentType: textPlain, body: strconv.Itoa(re.status) + " " + statusText(re.status) + ": " + re.reason + "\n"}, true)
			s.linger(c)
			return
		}
		if req.expect {
			// The client waits for 100 Continue before it sends its
			// body; answer now instead (RFC 9110 §10.1.1) and close
			// rather than read a body that may or may not come.
			s.queue(c, req.method, s.h.answer(req.method, req.path, req.rawQuery), true)
			s.linger(c)
			return
		}
		if req.bodyLen > 0 {
			if _, err := br.Discard(req.bodyLen); err != nil {
				return
			}
		}
		closing := req.close || s.draining.Load()
		s.queue(c, req.method, s.h.answer(req.method, req.path, req.rawQuery), closing)
		if closing {
			if br.Buffered() > 0 {
				// Requests pipelined after the last one: do not
				// reset the connection under the answer.
				s.linger(c)
			}
			return
		}
		if len(c.out) >= maxPending {
			if err := c.flush(); err != nil {
				return
			}
		}
	}
}

// queue appends the answer to c's output: the status line and headers of
// RFC 9112 §4 and §5, and the body unless the request was HEAD (which
// gets the Content-Length a GET would, RFC 9110 §9.3.2).
func (s *server) queue(c *conn, method string, a answer, closing bool) {
	b := c.out
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(a.status), 10)
	b = append(b, ' ')
	b = append(b, statusText(a.status)...)
	b = append(b, "\r\nContent-Type: "...)
	b = append(b, a.contentType...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(a.body)), 10)
	// nosniff: browsers must not guess a type for these bodies;
	// no-store: a probe answer is stale at once.
	b = append(b, "\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\n"...)
	if a.allow {
		b = append(b, "Allow: GET, HEAD\r\n"...)
	}
	if closing {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if method != "HEAD" {
		b = append(b, a.body...)
	}
	c.out = b
	if s.onAnswer != nil {
		s.onAnswer(method, a.status)
	}
}

// linger writes the queued answers, shuts down the sending side, and reads
// and discards what the client still sends, until it closes, for at most
// lingerTimeout and maxLinger bytes. Closing a socket with unread data
// makes the kernel send a reset, which may reach the client before it has
// read the answer and destroy it; this gives the client time to read it.
func (s *server) linger(c *conn) {
	if err := c.flush(); err != nil {
		return
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(s.lingerTimeout))
	if s.draining.Load() {
		return
	}
	_, _ = io.CopyN(io.Discard, c.Conn, maxLinger)
}

// statusText is the reason phrase of each status this package sends
// (RFC 9110 §15).
func statusText(code int) string {
	switch code {
	case statusOK:
		return "OK"
	case statusBadRequest:
		return "Bad Request"
	case statusNotFound:
		return "Not Found"
	case statusMethodNotAllowed:
		return "Method Not Allowed"
	case statusContentTooLarge:
		return "Content Too Large"
	case statusURITooLong:
		return "URI Too Long"
	case statusExpectationFailed:
		return "Expectation Failed"
	case statusHeaderTooLarge:
		return "Request Header Fields Too Large"
	case statusNotImplemented:
		return "Not Implemented"
	case statusServiceUnavailable:
		return "Service Unavailable"
	case statusVersionNotSupported:
		return "HTTP Version Not Supported"
	}
	return "Unknown"
}
