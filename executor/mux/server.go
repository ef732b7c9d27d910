// Package mux is a job's multiplexer on the executor's host: one process
// per job, started by the job's prepare call, that holds one exec stream
// into the job's pod (`warmpod job attach`) and carries every later call
// of the job over it, as OpenSSH's control master carries later sessions.
// A CI system starts the executor anew for every stage; without the
// multiplexer each stage pays a process's client set-up, a TLS handshake
// and an exec upgrade through the API server and the kubelet, where the
// stage itself costs the pod a few milliseconds.
//
// The executor's calls reach it over a unix socket in the driver's state
// directory ([Cluster] is the executor side: an session.Cluster whose
// Exec goes through the multiplexer when it answers and through a direct
// exec when it does not). Frames are package muxproto's; the contract is
// docs/design/multiplexer.md.
package mux

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/muxproto"
	"github.com/warmpod/warmpod/podcmd"
	"github.com/warmpod/warmpod/poolapi"
)

// Default bounds of a multiplexer's life (Server.Idle, Server.Reattach).
const (
	// DefaultIdle: a multiplexer with no call for this long exits. CI
	// systems call again within milliseconds between stages; a runner
	// that died leaves one that goes after this.
	DefaultIdle = 10 * time.Minute
	// DefaultReattach: a multiplexer that cannot open a stream into its
	// pod for this long exits (the pod is gone, or the API server
	// unreachable); the job's calls go direct meanwhile.
	DefaultReattach = 10 * time.Second
	// DefaultHeartbeat: how often the multiplexer sends a heartbeat on
	// its stream into the pod (a Ping that attach answers). A stage that
	// prints nothing for minutes leaves the stream idle otherwise, and a
	// proxy or load balancer in front of the API server, or the container
	// runtime's stream_idle_timeout, cuts an idle stream: client-go's
	// WebSocket pings stop at the API server (Kubernetes 1.30+ exec over
	// WebSocket), so they do not count beyond it. 10 s is below the
	// shortest idle timeouts in use (20 s).
	DefaultHeartbeat = 10 * time.Second
)

// Server is one job's multiplexer. Its fields are set before Serve.
type Server struct {
	// Cluster opens the exec stream into the pod (*pool.Cluster).
	Cluster session.Cluster
	// Pod and Job are the only pod and job the multiplexer serves: a
	// call that names another is refused.
	Pod poolapi.Pod
	Job string
	// Log gets the multiplexer's own notes (its stderr).
	Log io.Writer
	// Idle and Reattach bound its life (0: DefaultIdle, DefaultReattach).
	Idle, Reattach time.Duration
	// Heartbeat is the period of the stream's heartbeat (0:
	// DefaultHeartbeat; negative: none).
	Heartbeat time.Duration

	attachMu sync.Mutex // one attach at a time; held without mu
	mu       sync.Mutex
	stream   *podStream
	active   int       // calls being served
	lastCall time.Time // when the last call ended
	stop     chan string
	stopOnce sync.Once
	ctx      context.Context // Serve's
	down     atomic.Value    // the reason, once it is shutting down
}

// podStream is one exec of `warmpod job attach` and the calls it carries.
type podStream struct {
	w      *muxproto.Writer
	in     *io.PipeWriter
	routes map[uint32]*route
	next   uint32
	dead   chan struct{}
	err    error // why it died, once dead is closed
	// pong: attach answers a Ping (its Hello said Heartbeat); pongs
	// counts its answers.
	pong  bool
	pongs atomic.Int64
}

// route is one call in the pod: frames for its channel go to the client
// through a queue of its own, so a client that stops reading holds up
// nobody else; when its queue is full it is dropped (its call stopped).
type route struct {
	client *muxproto.Writer
	conn   net.Conn
	q      chan muxproto.Frame
	once   sync.Once
	exited chan struct{} // the Exit was sent, or the route dropped
}

// routeQueue is how many frames (of at most 64 KiB) wait for one client.
const routeQueue = 256

func newRoute(c net.Conn) *route {
	rt := &route{client: muxproto.NewWriter(c), conn: c, q: make(chan muxproto.Frame, routeQueue), exited: make(chan struct{})}
	go rt.write()
	return rt
}

// send queues f for the client; false when the client does not keep up.
func (rt *route) send(f muxproto.Frame) bool {
	select {
	case rt.q <- f:
		return true
	default:
		return false
	}
}

func (rt *route) finish() { rt.once.Do(func() { close(rt.exited) }) }

// drop ends the route without its Exit: the client is gone or stuck.
func (rt *route) drop() {
	rt.finish()
	_ = rt.conn.Close()
}

func (rt *route) write() {
	for {
		select {
		case f := <-rt.q:
			if err := rt.client.Write(f.Type, 0, f.Payload); err != nil {
				rt.drop()
				return
			}
			if f.Type == muxproto.TypeExit {
				rt.finish()
				return
			}
		case <-rt.exited:
			return
		}
	}
}

// busy counts a call being served until the returned func is called:
// the idle bound runs from the end of the last call.
func (s *Server) busy() (done func()) {
	s.mu.Lock()
	s.active++
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.active--
		s.lastCall = time.Now()
		s.mu.Unlock()
	}
}

func (s *Server) shutdown(reason string) {
	s.stopOnce.Do(func() {
		s.down.Store(reason)
		s.stop <- reason
	})
}

// Serve accepts calls on ln until the multiplexer's job is over: the
// pod's attach says the job ended, a Shutdown frame comes (the job's
// clean-up), no call came for Idle, the pod stream could not be opened
// for Reattach, or ctx ends. It returns the reason. The listener is
// closed on return; the socket file is the caller's.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) string {
	if s.Idle <= 0 {
		s.Idle = DefaultIdle
	}
	if s.Reattach <= 0 {
		s.Reattach = DefaultReattach
	}
	if s.Heartbeat == 0 {
		s.Heartbeat = DefaultHeartbeat
	}
	if s.Log == nil {
		s.Log = io.Discard
	}
	s.stop = make(chan string, 1)
	s.lastCall = time.Now()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.ctx = ctx
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				// Out of file descriptors, say: the next accept may work.
				time.Sleep(50 * time.Millisecond)
				continue
			}
			go s.serveConn(ctx, c)
		}
	}()
	// The stream is opened at once: the first stage usually follows
	// prepare within milliseconds (a failure ends the multiplexer there).
	go func() { _, _ = s.podStream(ctx) }()
	tick := time.NewTicker(min(s.Idle/4, 5*time.Second))
	defer tick.Stop()
	var reason string
	for reason == "" {
		select {
		case reason = <-s.stop:
		case <-ctx.Done():
			reason = "cancelled"
		case <-tick.C:
			s.mu.Lock()
			if s.active == 0 && time.Since(s.lastCall) >= s.Idle {
				reason = "idle"
			}
			s.mu.Unlock()
		}
	}
	_ = ln.Close()
	s.mu.Lock()
	st := s.stream
	s.mu.Unlock()
	if st != nil {
		// A stream that does not take the Bye in a second is closed
		// anyway.
		bye := make(chan struct{})
		go func() { _ = st.w.WriteJSON(muxproto.TypeBye, 0, muxproto.Bye{Reason: reason}); close(bye) }()
		select {
		case <-bye:
		case <-time.After(time.Second):
		}
		cancel() // before the stream ends: its end is no cue to reattach
		_ = st.in.Close()
	}
	fmt.Fprintf(s.Log, "warmpod mux: job %s: %s\n", s.Job, reason)
	return reason
}

// podStream returns the live stream into the pod, opening one (again)
// when there is none: retried with backoff for Reattach at most.
func (s *Server) podStream(ctx context.Context) (*podStream, error) {
	s.attachMu.Lock()
	defer s.attachMu.Unlock()
	if r := s.down.Load(); r != nil {
		return nil, fmt.Errorf("the multiplexer is ending: %s", r)
	}
	s.mu.Lock()
	st := s.stream
	s.mu.Unlock()
	if st != nil {
		select {
		case <-st.dead:
		default:
			return st, nil
		}
	}
	deadline := time.Now().Add(s.Reattach)
	for attempt := 0; ; attempt++ {
		st, err := s.attach(ctx)
		if err == nil {
			s.mu.Lock()
			s.stream = st
			s.mu.Unlock()
			return st, nil
		}
		fmt.Fprintf(s.Log, "warmpod mux: attach to pod %s: %v\n", s.Pod.Name, err)
		if errors.Is(err, errRefusedAttach) {
			s.shutdown(err.Error())
			return nil, err
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			// The multiplexer is no use without a stream: it exits, and
			// every call goes direct at once instead of waiting here.
			err = fmt.Errorf("no stream into pod %s for %s: %w", s.Pod.Name, s.Reattach, err)
			s.shutdown(err.Error())
			return nil, err
		}
		select {
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		case <-ctx.Done():
		}
	}
}

// errRefusedAttach: the pod's warmpod ran attach and refused (an exit
// code, not a broken stream).
var errRefusedAttach = errors.New("the pod refused the stream")

// helloTimeout bounds the wait for attach's Hello after the exec starts.
const helloTimeout = 15 * time.Second

// attach execs `warmpod job attach` in the pod and waits for its Hello.
func (s *Server) attach(ctx context.Context) (*podStream, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errb bytes.Buffer
	st := &podStream{w: muxproto.NewWriter(inW), in: inW, routes: map[uint32]*route{}, dead: make(chan struct{})}
	execDone := make(chan error, 1)
	go func() {
		code, err := s.Cluster.Exec(ctx, s.Pod, podcmd.JobAttach{Bin: s.Pod.Bin, Job: s.Job}.Argv(), inR, outW, &errb)
		if err == nil && code != 0 {
			// The pod answered: it is draining, another job's, or its
			// warmpod has no attach (an older image, exit 2). Asking
			// again gets the same answer; only a broken stream is
			// retried.
			err = fmt.Errorf("%w: warmpod job attach: exit %d: %s", errRefusedAttach, code, bytes.TrimSpace(errb.Bytes()))
		} else if err == nil {
			err = errors.New("the stream ended")
		}
		_ = outW.CloseWithError(err)
		_ = inR.CloseWithError(err)
		execDone <- err
	}()
	r := muxproto.NewReader(outR)
	hello := make(chan error, 1)
	var h muxproto.Hello // read once hello has its answer
	go func() {
		f, err := r.Read()
		if err == nil && f.Type != muxproto.TypeHello {
			err = fmt.Errorf("attach began with a %s frame", f.Type)
		}
		if err == nil {
			err = muxproto.Decode(f, &h)
		}
		if err == nil && (h.Version != muxproto.Version || h.Job != s.Job) {
			err = fmt.Errorf("attach serves job %q, version %d", h.Job, h.Version)
		}
		hello <- err
	}()
	select {
	case err := <-hello:
		if err != nil {
			_ = inW.CloseWithError(err)
			if xerr := <-execDone; xerr != nil && !errors.Is(err, xerr) {
				err = xerr
			}
			return nil, err
		}
	case <-time.After(helloTimeout):
		_ = inW.Close()
		_ = outR.Close()
		return nil, errors.New("no hello from warmpod job attach")
	}
	st.pong = h.Heartbeat
	go s.readPod(st, r, execDone)
	go s.beat(st)
	return st, nil
}

// beat sends st's heartbeat every Heartbeat until st dies: a Ping to an
// attach that answers it, else an empty Stdin frame on channel 0, which
// an attach of any version ignores (an older one ends the stream on a
// frame type it does not know). Either is data in the stream, so no hop
// between here and the pod finds it idle.
func (s *Server) beat(st *podStream) {
	if s.Heartbeat < 0 {
		return
	}
	t := time.NewTicker(s.Heartbeat)
	defer t.Stop()
	for seq := uint64(1); ; seq++ {
		select {
		case <-st.dead:
			return
		case <-t.C:
		}
		var err error
		if st.pong {
			err = st.w.Write(muxproto.TypePing, 0, strconv.AppendUint(nil, seq, 10))
		} else {
			err = st.w.Write(muxproto.TypeStdin, 0, nil)
		}
		if err != nil {
			return // the stream broke: readPod sees it too
		}
	}
}

// readPod hands the pod's frames to their calls until the stream ends;
// then every call still open gets an Exit with the stream's error, so its
// executor reattaches the stage from its offset.
func (s *Server) readPod(st *podStream, r *muxproto.Reader, execDone <-chan error) {
	var cause error
	for cause == nil {
		f, err := r.Read()
		if err != nil {
			cause = err
			break
		}
		switch f.Type {
		case muxproto.TypeBye:
			var b muxproto.Bye
			_ = muxproto.Decode(f, &b)
			cause = fmt.Errorf("attach said bye: %s", b.Reason)
			if b.Reason == "job-ended" {
				s.shutdown("job-ended")
			}
		case muxproto.TypePong:
			st.pongs.Add(1)
		case muxproto.TypeStdout, muxproto.TypeStderr, muxproto.TypeExit:
			s.mu.Lock()
			rt := st.routes[f.Channel]
			if f.Type == muxproto.TypeExit {
				delete(st.routes, f.Channel)
			}
			s.mu.Unlock()
			if rt == nil {
				continue // its client left
			}
			if !rt.send(f) {
				// The client does not read: stop its call in the pod
				// rather than hold up the others.
				s.mu.Lock()
				delete(st.routes, f.Channel)
				s.mu.Unlock()
				_ = st.w.Write(muxproto.TypeClose, f.Channel, nil)
				rt.drop()
			}
		}
	}
	_ = st.in.CloseWithError(cause)
	select {
	case err := <-execDone:
		if err != nil {
			cause = err
		}
	case <-time.After(2 * time.Second):
	}
	s.mu.Lock()
	st.err = cause
	close(st.dead)
	routes := st.routes
	st.routes = map[uint32]*route{}
	s.mu.Unlock()
	if s.ctx.Err() == nil && !strings.HasPrefix(cause.Error(), "attach said bye") {
		// A new stream at once, not at the next call: the calls that
		// lost theirs reattach through it, and a pod that is gone
		// shows (no stream within Reattach: the multiplexer exits).
		go func() { _, _ = s.podStream(s.ctx) }()
	}
	for _, rt := range routes {
		if !rt.send(exitFrame(muxproto.Exit{Error: fmt.Sprintf("the exec stream into pod %s broke: %v", s.Pod.Name, cause)})) {
			rt.drop()
		}
	}
}

// clientHelloTimeout bounds how long a connected client may take to name
// its job and call.
const clientHelloTimeout = 10 * time.Second

// serveConn serves one call of one executor process: Hello (its job and
// pod, or Shutdown), Open, then the call's stdin; the call's output and
// exit go back.
func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	if err := checkPeer(c); err != nil {
		fmt.Fprintf(s.Log, "warmpod mux: refused a connection: %v\n", err)
		return
	}
	w := muxproto.NewWriter(c)
	_ = c.SetReadDeadline(time.Now().Add(clientHelloTimeout))
	r := muxproto.NewReader(c)
	f, ok := s.greet(w, r)
	if !ok {
		return
	}
	if f.Type == muxproto.TypeShutdown {
		// Only after this job's Hello: a process of the runner's uid
		// that does not know the job and its pod cannot stop it.
		s.shutdown("shutdown")
		_ = w.WriteJSON(muxproto.TypeBye, 0, muxproto.Bye{Reason: "shutdown"})
		return
	}
	if f.Type == muxproto.TypeRequest {
		s.serveRequest(ctx, w, f)
		return
	}
	var o muxproto.Open
	if f.Type != muxproto.TypeOpen || muxproto.Decode(f, &o) != nil {
		refuseCall(w, "expected an open frame, got %s", f.Type)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	s.serveCall(ctx, c, w, r, f.Payload)
}

// refuseCall answers a call the multiplexer does not serve: an Exit marked
// Refused, so the client goes direct instead.
func refuseCall(w *muxproto.Writer, format string, a ...any) {
	_ = w.WriteJSON(muxproto.TypeExit, 0, muxproto.Exit{Error: fmt.Sprintf(format, a...), Refused: true})
}

// greet reads a client's first frame and, when it is a Hello this
// multiplexer serves, the frame after it (the call: an Open, a Request
// or a Shutdown). Anything else first, a refused Hello and a read error
// give false: the connection has nothing more to say.
func (s *Server) greet(w *muxproto.Writer, r *muxproto.Reader) (muxproto.Frame, bool) {
	f, err := r.Read()
	if err != nil {
		return f, false
	}
	if f.Type != muxproto.TypeHello {
		// A Shutdown too: it needs the Hello that names this job and
		// its pod, as every other call does.
		fmt.Fprintf(s.Log, "warmpod mux: refused a %s without a hello\n", f.Type)
		refuseCall(w, "a call begins with hello, not %s", f.Type)
		return f, false
	}
	if err := s.checkHello(f); err != nil {
		refuseCall(w, "%v", err)
		return f, false
	}
	f, err = r.Read()
	return f, err == nil
}

// checkHello says why a client's Hello frame is not for this multiplexer
// (undecodable, another wire version, another job or pod), or nil.
func (s *Server) checkHello(f muxproto.Frame) error {
	var h muxproto.Hello
	if err := muxproto.Decode(f, &h); err != nil {
		return err
	}
	if h.Version != muxproto.Version {
		return fmt.Errorf("wire version %d, not %d", h.Version, muxproto.Version)
	}
	if h.Job != s.Job || h.PodUID != string(s.Pod.UID) {
		return fmt.Errorf("this multiplexer serves job %s in pod %s, not job %s in pod uid %s", s.Job, s.Pod.Name, h.Job, h.PodUID)
	}
	return nil
}

// serveCall carries one call, whose Open payload is open, over the pod
// stream on a channel of its own until its Exit reaches the client or the
// client goes away; r then carries the call's stdin.
func (s *Server) serveCall(ctx context.Context, c net.Conn, w *muxproto.Writer, r *muxproto.Reader, open []byte) {
	defer s.busy()()
	st, err := s.podStream(ctx)
	if err != nil {
		refuseCall(w, "%v", err)
		return
	}
	rt := newRoute(c)
	defer rt.finish() // its writer goroutine ends with the call
	ch, ok := s.addRoute(st, rt)
	if !ok {
		refuseCall(w, "the exec stream into pod %s broke", s.Pod.Name)
		return
	}
	// Accept is queued first, so the client knows its stdin is taken
	// from here on; the call's own frames can only follow the Open.
	rt.send(muxproto.Frame{Type: muxproto.TypeAccept})
	if err := st.w.Write(muxproto.TypeOpen, ch, open); err != nil {
		// The stream died under the Open: a broken stream for the
		// client, which reattaches through this multiplexer.
		if s.removeRoute(st, ch) {
			rt.send(exitFrame(muxproto.Exit{Error: fmt.Sprintf("the exec stream into pod %s broke: %v", s.Pod.Name, err)}))
		}
		<-rt.exited
		return
	}
	clientGone := forwardStdin(r, st, ch)
	select {
	case <-rt.exited:
	case <-clientGone:
		// The executor process went away mid-call (killed, or its CI
		// system cancelled it): the call in the pod is stopped, as a cut
		// direct exec would be. A stage goes on under PID 1.
		if s.removeRoute(st, ch) {
			_ = st.w.Write(muxproto.TypeClose, ch, nil)
		}
	}
}

// addRoute gives rt the next channel of st; false when st is dead, as no
// frame of the call would ever come back.
func (s *Server) addRoute(st *podStream, rt *route) (uint32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-st.dead:
		return 0, false
	default:
	}
	st.next++
	st.routes[st.next] = rt
	return st.next, true
}

// removeRoute takes channel ch out of st and says whether it was still
// there: when readPod already took it out (the Exit came, or the stream
// died), the call is over and there is nothing to stop.
func (s *Server) removeRoute(st *podStream, ch uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, open := st.routes[ch]
	delete(st.routes, ch)
	return open
}

// forwardStdin copies the client's Stdin and StdinEOF frames from r to
// channel ch of st, in a goroutine of its own; the returned channel is
// closed when the client's side ends (it went away, or closed).
func forwardStdin(r *muxproto.Reader, st *podStream, ch uint32) <-chan struct{} {
	clientGone := make(chan struct{})
	go func() {
		defer close(clientGone)
		for {
			f, err := r.Read()
			if err != nil {
				return
			}
			switch f.Type {
			case muxproto.TypeStdin, muxproto.TypeStdinEOF:
				_ = st.w.Write(f.Type, ch, f.Payload)
			}
		}
	}()
	return clientGone
}

// checkPeer accepts only a process of the multiplexer's own uid (the
// socket's mode 0600 and its 0700 directory say the same; this is the
// check that does not depend on them).
func checkPeer(c *net.UnixConn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	if int(cred.Uid) != os.Getuid() {
		return fmt.Errorf("peer uid %d is not %d", cred.Uid, os.Getuid())
	}
	return nil
}

// request is a TypeRequest payload: an API call for the job's clean-up,
// made on the multiplexer's connection (warm: no TLS handshake of the
// executor's own). Only the multiplexer's own pod and job are served.
type request struct {
	// Op is "delete" (the job's pod, uid precondition) or "pods-of-job"
	// (the pods labelled for Owner, whose Job must be this one's).
	Op    string        `json:"op"`
	Owner poolapi.Owner `json:"owner,omitempty"`
}

func (s *Server) serveRequest(ctx context.Context, w *muxproto.Writer, f muxproto.Frame) {
	var req request
	if err := muxproto.Decode(f, &req); err != nil {
		_ = w.WriteJSON(muxproto.TypeExit, 0, muxproto.Exit{Error: err.Error(), Refused: true})
		return
	}
	defer s.busy()()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var result any
	var err error
	switch {
	case req.Op == "delete":
		err = s.Cluster.Delete(ctx, s.Pod)
	case req.Op == "pods-of-job" && req.Owner.Job == s.Job:
		result, err = s.Cluster.PodsOfJob(ctx, req.Owner)
	default:
		_ = w.WriteJSON(muxproto.TypeExit, 0, muxproto.Exit{Error: fmt.Sprintf("request %q for job %q is not this multiplexer's", req.Op, req.Owner.Job), Refused: true})
		return
	}
	if err != nil {
		_ = w.WriteJSON(muxproto.TypeExit, 0, muxproto.Exit{Error: err.Error()})
		return
	}
	if result != nil {
		_ = w.WriteJSON(muxproto.TypeStdout, 0, result)
	}
	_ = w.WriteJSON(muxproto.TypeExit, 0, muxproto.Exit{})
}

func exitFrame(x muxproto.Exit) muxproto.Frame {
	b, _ := json.Marshal(x)
	return muxproto.Frame{Type: muxproto.TypeExit, Payload: b}
}
