// Package control is the local protocol between the `warmpod job|probe|status`
// clients and PID 1: one JSON request line and one JSON response line per
// connection over a unix socket (mode 0600; its directory 0711). PID 1 only
// answers peers of its own uid or root, checked with SO_PEERCRED
// (unix(7)); nothing that changes state is reachable over TCP.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/internal/sockdial"
)

// Exit codes of the CLI, from sysexits(3): an executor script can tell "retry
// on another pod" (75) from "this pod cannot" (69) and "your input is bad"
// (65) without parsing messages.
const (
	ExitUsage       = 2   // bad command line
	ExitDataErr     = 65  // EX_DATAERR: bad job spec or bad input
	ExitUnavailable = 69  // EX_UNAVAILABLE: no job, draining, or PID 1 not reachable
	ExitSoftware    = 70  // EX_SOFTWARE: internal error in PID 1
	ExitCantCreat   = 73  // EX_CANTCREAT: warmpod install cannot write its copy
	ExitIOErr       = 74  // EX_IOERR: job stage lost PID 1 or its log: the stage's outcome is unknown (ask job wait)
	ExitTempFail    = 75  // EX_TEMPFAIL: busy or not claimable; retry on another pod
	ExitNoPerm      = 77  // EX_NOPERM: peer credentials refused
	ExitLogGone     = 100 // the job log disappeared (as gitlab-runner-helper read-logs)
)

// Operations understood by PID 1.
const (
	OpJobStart = "job.start" // Spec holds the job spec; claims the lease
	OpJobEnd   = "job.end"   // ends the current job
	OpJobEnv   = "job.env"   // returns the job's environment in Env
	OpStatus   = "status"    // returns the status document in Status
	OpProbe    = "probe"     // Probe is "live" or "ready"; OK tells the result

	OpJobStage  = "job.stage"   // starts Argv as stage Stage (cwd Dir); Data holds the stage
	OpJobStatus = "job.status"  // Data holds the job (or Stage's) status
	OpJobWait   = "job.wait"    // waits up to Duration for Stage to end; Data holds it
	OpJobCancel = "job.cancel"  // kills the job's processes, or Stage's only (SIGKILL after Duration)
	OpJobRenew  = "job.renew"   // heartbeat for the lease of Job
	OpJobPut    = "job.put"     // registers the caller's write of temporary file Path for the job holding the lease
	OpStall     = "debug.stall" // test hook: stall PID 1's main loop for Duration
)

// MaxRequestBytes bounds one request line (the 1 MiB job spec plus
// framing).
const MaxRequestBytes = 1<<20 + 4096

// MaxResponseBytes bounds one response line read by a client (a job
// environment can hold up to 1 MiB of values, quoted).
const MaxResponseBytes = 8 << 20

// RequestTimeout bounds reading a request and writing a response (not the
// work in between); a client that stalls longer is disconnected.
const RequestTimeout = 10 * time.Second

// Request is one client request: one JSON line (at most
// MaxRequestBytes). Build it with Client; testdata/golden/requests.json
// holds every form.
type Request struct {
	// Op is the operation (the Op* constants); PID 1 answers an unknown
	// one with ExitUsage.
	Op string `json:"op"`
	// Job names the job the call is for: refused (75) when another job
	// holds the lease, and renews that job's lease when it holds it.
	Job string `json:"job,omitempty"`
	// Spec is job.start's job spec (a JobSpec), which holds secrets.
	Spec json.RawMessage `json:"spec,omitempty"`
	// Probe is "live" or "ready" (probe).
	Probe string `json:"probe,omitempty"`
	// Stage names a stage (job.stage, job.status, job.wait, job.cancel).
	Stage string `json:"stage,omitempty"`
	// Argv is a stage leader's command line, Argv[0] absolute (job.stage).
	Argv []string `json:"argv,omitempty"`
	// Dir is the stage leader's working directory; empty: PID 1's.
	Dir string `json:"dir,omitempty"`
	// SHA256 is the hex SHA-256 of a stage's script (job.stage): a second
	// request for the same stage with the same digest attaches to the
	// stage instead of being refused, and never runs it again. With Stage
	// set, job.cancel cancels that stage only.
	SHA256 string `json:"sha256,omitempty"`
	// Path is the absolute temporary file of a job.put.
	Path string `json:"path,omitempty"`
	// Duration is a Go duration: the wait timeout, the cancel grace or
	// the stall.
	Duration string `json:"duration,omitempty"`
}

// Response is PID 1's answer: one JSON line (at most MaxResponseBytes);
// testdata/golden/responses.json holds examples.
type Response struct {
	// OK is true when the operation was done.
	OK bool `json:"ok"`
	// Code is the exit code the client should use (0 with OK).
	Code int `json:"code"`
	// Error says why it was refused; its text is not part of the
	// contract, Code and Refusal are.
	Error string `json:"error,omitempty"`
	// Refusal names the refusal for a client that acts on which one it
	// was (a Refusal value); empty on success and on a failure that is
	// no refusal (a probe, an internal error). Code alone cannot tell
	// them apart: 69 is both "no job holds the lease" and "draining".
	Refusal Refusal `json:"refusal,omitempty"`
	// Job is the job the answer is about (job.start, job.end, job.stage).
	Job string `json:"job,omitempty"`
	// State is the pod's state after the operation: "idle", "busy" or
	// "draining" (lease.State).
	State string `json:"state,omitempty"`
	// Replay is true when job.start was a replay of the current job's
	// start (same id and nonce): an idempotent success.
	Replay bool `json:"replay,omitempty"`
	// Env is job.env's environment, "KEY=VALUE" each; it holds secrets.
	Env []string `json:"env,omitempty"`
	// Status is status's document (PID 1's state, lease, idle deadline).
	Status json.RawMessage `json:"status,omitempty"`
	// Data is an operation's JSON document (a stage, a job status).
	Data json.RawMessage `json:"data,omitempty"`
	// LogPath is the job's output log.
	LogPath string `json:"log_path,omitempty"`
	// User is the job user ("UID:GID") that job commands run as, if any.
	User string `json:"user,omitempty"`
	// JobDir is the job's tmpfs directory (file variables, TMPDIR, stage
	// scripts), owned by the job user (job.status).
	JobDir string `json:"job_dir,omitempty"`
}

// Refusal names why PID 1 refused a request (Response.Refusal).
type Refusal string

// The refusals, each with the exit code it comes with.
const (
	RefusalNoJob        Refusal = "no-job"        // 69: no job holds the lease
	RefusalDraining     Refusal = "draining"      // 69: the pod takes no more jobs
	RefusalNoStage      Refusal = "no-stage"      // 69: the job has no such stage
	RefusalCancelled    Refusal = "cancelled"     // 69: the job's call was cancelled
	RefusalExiting      Refusal = "exiting"       // 69: PID 1 is shutting down
	RefusalBusy         Refusal = "busy"          // 75: another job holds the lease
	RefusalWrongJob     Refusal = "wrong-job"     // 75: the request names another job
	RefusalStillRunning Refusal = "still-running" // 75: the stage has not ended
	RefusalRefused      Refusal = "refused"       // 75: refused for now, worth retrying
	RefusalInvalid      Refusal = "invalid"       // 65: the request's data is invalid
	RefusalUsage        Refusal = "usage"         // 2: the request is malformed
)

// Peer identifies the process on the other end of a connection, from
// SO_PEERCRED.
type Peer struct {
	// PID, UID and GID are the peer process's, as the kernel recorded
	// them when it connected.
	PID, UID, GID int
}

// Handler serves one request. It must not keep req past the call.
type Handler func(ctx context.Context, peer Peer, req *Request) Response

// Server accepts control connections.
type Server struct {
	path    string
	ln      *net.UnixListener
	handler Handler
	log     *initlog.Logger
	uid     int

	wg       sync.WaitGroup
	conns    chan struct{} // at most MaxConns connections open
	slots    chan struct{} // at most MaxConcurrent requests being handled
	buffered atomic.Int64  // bytes of request lines being read, at most FrameBudget
	ino      uint64        // the socket file's inode, for Close
}

// MaxConns bounds the control connections PID 1 keeps open at once, each
// costing a goroutine and a 4 KiB read buffer until its request line has
// arrived (RequestTimeout at most); more are answered with exit 75 and
// closed at once. It is high so that silent or garbage connections (a
// flood from job code running as root) cannot crowd out the executor's
// calls, which arrive complete within milliseconds.
const MaxConns = 2048

// MaxConcurrent bounds the requests PID 1 handles at once, once read (a
// job.wait may last an hour); more get exit 75 at once.
const MaxConcurrent = 64

// FrameBudget bounds, in bytes, the request lines being read by all
// connections together (a job spec may be 1 MiB; a thousand connections
// each sending a large frame must not make PID 1 allocate a gigabyte); a
// connection whose line would overrun it gets exit 75. Only the part of a
// line beyond its first 4 KiB counts, so small requests always get
// through. With MaxConns and the 4 KiB buffers it bounds what the control
// socket can make PID 1 hold at about 16 MiB + 2048 × 16 KiB.
const FrameBudget = 16 << 20

// Listen creates the socket at path: its directory is created (or set) to
// mode 0711 — others may traverse it to reach their own job directory
// below it but not list it — a stale socket file is removed, and the socket
// gets mode 0600, so only PID 1's uid (and root) can connect (connect(2)
// needs write permission on the socket file; SO_PEERCRED is checked as
// well). Errors: ErrInUse when a server answers on path already (a stale
// socket is replaced); those of mkdir, chmod, remove and listen.
func Listen(path string, h Handler, log *initlog.Logger) (*Server, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket %s: exists and is not a socket", path)
		}
		// A socket that answers belongs to a running warmpod (PID 1,
		// when this is a second one started by mistake inside the
		// container): taking it over would cut PID 1 off from every
		// client. Only a stale one is removed.
		if c, err := sockdial.Unix(context.Background(), path, time.Second); err == nil {
			_ = c.Close()
			return nil, fmt.Errorf("control socket %s: %w", path, ErrInUse)
		}
		_ = os.Remove(path)
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, err
	}
	s := &Server{path: path, ln: ln, handler: h, log: log, uid: os.Geteuid(),
		conns: make(chan struct{}, MaxConns), slots: make(chan struct{}, MaxConcurrent)}
	if st, err := os.Lstat(path); err == nil {
		s.ino = inode(st)
	}
	return s, nil
}

// ErrInUse reports that another server answers on the control socket.
var ErrInUse = errors.New("in use by a running warmpod")

// inode is st's inode number (0 when unknown).
func inode(st os.FileInfo) uint64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Ino
	}
	return 0
}

// listenPrivate binds a unix socket at path with mode 0600 from its
// first instant, without touching the process-wide umask (other
// goroutines may be creating files meanwhile): it binds in a fresh 0700
// directory next to path, where nobody else can reach it, sets the mode,
// and renames it into place.
func listenPrivate(path string) (*net.UnixListener, error) {
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".listen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The listener would unlink its bound name, which is gone after the
	// rename; Server.Close removes path instead.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(bound, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := os.Rename(bound, path); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return ln, nil
}

// SetHandler sets the handler of a server made with a nil one, before
// Serve: the socket can be claimed before what serves it exists.
func (s *Server) SetHandler(h Handler) { s.handler = h }

// Serve accepts connections until Close. It returns nil after Close.
func (s *Server) Serve(ctx context.Context) error {
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				s.wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Warn("control accept failed", "error", err)
			time.Sleep(50 * time.Millisecond)
			continue
		}
		select {
		case s.conns <- struct{}{}:
		default:
			go refuse(c, "too many open control connections")
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() { <-s.conns }()
			s.serveConn(ctx, c)
		}()
	}
}

// Close stops accepting, removes the socket file and waits for requests in
// flight.
func (s *Server) Close() error {
	err := s.ln.Close()
	// Remove the socket only if it is still this server's: never the
	// one a later server made at the same path.
	if st, lerr := os.Lstat(s.path); lerr == nil && s.ino != 0 && inode(st) == s.ino {
		_ = os.Remove(s.path)
	}
	s.wg.Wait()
	return err
}

// Healthy reports whether the socket file still exists and is a socket (a
// liveness check: a deleted socket cannot be reached by any client).
func (s *Server) Healthy() error {
	st, err := os.Lstat(s.path)
	if err != nil {
		return err
	}
	if st.Mode()&os.ModeSocket == 0 {
		return errors.New("not a socket")
	}
	return nil
}

func (s *Server) serveConn(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(RequestTimeout))
	peer, err := peerCred(c)
	if err != nil {
		s.log.Warn("control peer credentials unavailable", "error", err)
		return
	}
	if peer.UID != 0 && peer.UID != s.uid {
		s.log.Warn("control peer refused", "uid", peer.UID, "pid", peer.PID)
		writeResponse(c, Response{Code: ExitNoPerm, Error: "permission denied: only root or uid " + fmt.Sprint(s.uid)})
		return
	}
	req, err := readRequest(bufio.NewReaderSize(c, 4096), s.reserve)
	if errors.Is(err, errBudget) {
		writeResponse(c, Response{Code: ExitTempFail, Error: err.Error()})
		return
	}
	if err != nil {
		writeResponse(c, Response{Code: ExitDataErr, Error: err.Error()})
		return
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		clear(req.Spec)
		writeResponse(c, Response{Code: ExitTempFail, Error: "too many concurrent requests"})
		return
	}
	// A job end waits for the grace period: no deadline while PID 1 works.
	_ = c.SetDeadline(time.Time{})
	resp := s.handler(ctx, peer, req)
	clear(req.Spec)
	_ = c.SetWriteDeadline(time.Now().Add(RequestTimeout))
	writeResponse(c, resp)
	for i := range resp.Env {
		resp.Env[i] = ""
	}
}

// refuse answers c with exit 75 and closes it, bounded by a second.
func refuse(c net.Conn, why string) {
	_ = c.SetDeadline(time.Now().Add(time.Second))
	writeResponse(c, Response{Code: ExitTempFail, Error: why})
	_ = c.Close()
}

// errBudget reports a request line that would overrun FrameBudget.
var errBudget = errors.New("bad request: PID 1 is reading too many large requests at once; retry")

// reserve takes n bytes of FrameBudget (n < 0 gives them back); false
// when they are not available.
func (s *Server) reserve(n int) bool {
	if s.buffered.Add(int64(n)) > FrameBudget && n > 0 {
		s.buffered.Add(int64(-n))
		return false
	}
	return true
}

// ReadRequest reads one request frame from r: a JSON object on one line of
// at most MaxRequestBytes bytes (the '\n' may be missing before EOF). The
// line's bytes are cleared once decoded, since a job spec carries secrets;
// r may have buffered more. Errors start with "bad request: " and never
// quote the input: the line is too long, the read failed (a timeout, EOF
// before any byte), or it is not a JSON object of Request's fields.
func ReadRequest(r *bufio.Reader) (*Request, error) {
	return readRequest(r, nil)
}

// readRequest is ReadRequest with the line's bytes taken from a budget
// (reserve, when not nil; errBudget when it refuses).
func readRequest(r *bufio.Reader, reserve func(int) bool) (*Request, error) {
	line, err := readLine(r, MaxRequestBytes, reserve)
	if reserve != nil {
		defer reserve(-budgeted(cap(line)))
	}
	if errors.Is(err, errBudget) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("bad request: %w", err)
	}
	var req Request
	err = req.decode(line)
	clear(line) // it may hold a job spec with secrets
	if err != nil {
		return nil, errors.New("bad request: not a JSON request object")
	}
	return &req, nil
}

func writeResponse(c net.Conn, r Response) {
	b := append(r.AppendJSON(nil), '\n')
	_, _ = c.Write(b)
	clear(b)
}

// ReadLine reads one line up to and including '\n' (which is stripped), or
// a last line that ends at EOF, holding at most limit bytes. Errors: "line
// longer than limit bytes"; io.EOF when nothing came before EOF; those of
// r.
func ReadLine(r *bufio.Reader, limit int) ([]byte, error) { return readLine(r, limit, nil) }

// readLine is ReadLine with a budget.
// With reserve set, every growth of the line past freeLine bytes is
// reserved from it first (and given back on error; on success the caller
// gives back budgeted(cap(line))); errBudget when it refuses.
func readLine(r *bufio.Reader, limit int, reserve func(int) bool) ([]byte, error) {
	var out []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(out)+len(chunk) > limit {
			clear(out)
			if reserve != nil {
				reserve(-budgeted(cap(out)))
			}
			return nil, fmt.Errorf("line longer than %d bytes", limit)
		}
		if need := len(out) + len(chunk); need > cap(out) {
			// Grow explicitly, so the reservation matches the capacity.
			grown := max(need, min(2*cap(out), limit))
			if reserve != nil && !reserve(budgeted(grown)-budgeted(cap(out))) {
				clear(out)
				reserve(-budgeted(cap(out)))
				return nil, errBudget
			}
			n := make([]byte, len(out), grown)
			copy(n, out)
			clear(out)
			out = n
		}
		out = append(out, chunk...)
		if err == nil {
			return out[:len(out)-1], nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(out) > 0 && errors.Is(err, io.EOF) {
			return out, nil // a last line without '\n'
		}
		clear(out)
		if reserve != nil {
			reserve(-budgeted(cap(out)))
		}
		return nil, err
	}
}

// freeLine is the part of a request line that does not count against
// FrameBudget: the executor's calls are a few hundred bytes (a job start
// is the exception), so a flood of large frames cannot refuse them, and
// MaxConns × freeLine bounds what this part can hold (8 MiB).
const freeLine = 4 << 10

// budgeted is how much of a line buffer of capacity c counts against
// FrameBudget.
func budgeted(c int) int { return max(0, c-freeLine) }

func peerCred(c *net.UnixConn) (Peer, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if cerr != nil {
		return Peer{}, cerr
	}
	return Peer{PID: int(cred.Pid), UID: int(cred.Uid), GID: int(cred.Gid)}, nil
}

// Call sends req to the PID 1 listening at path and returns its response.
// The exchange is bounded by ctx's deadline only: a job end legitimately
// takes the whole grace period, and a PID 1 that dies closes the socket.
// Errors: the socket cannot be reached within 2 s (the caller should exit
// ExitUnavailable), or the exchange failed or ctx expired.
func Call(ctx context.Context, path string, req *Request) (*Response, error) {
	c, err := sockdial.Unix(ctx, path, 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	b := append(req.AppendJSON(nil), '\n')
	_, err = c.Write(b)
	clear(b)
	if err != nil {
		return nil, err
	}
	line, err := readLine(bufio.NewReaderSize(c, 64<<10), MaxResponseBytes, nil)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	var resp Response
	err = resp.decode(line)
	clear(line)
	if err != nil {
		return nil, fmt.Errorf("decoding response: %w", err)
	}
	return &resp, nil
}
