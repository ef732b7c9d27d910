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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/muxproto"
	"github.com/warmpod/warmpod/poolapi"
)

// fakePod is an session.Cluster whose Exec of `job attach` runs a
// stand-in for the pod's attach (it speaks muxproto on the exec's stdin
// and stdout) and whose other execs are the "direct" path. Commands, as
// argv[2] (warmpod's names, so the client carries them; the fake's
// behaviour): "put" copies stdin to stdout until StdinEOF and exits 0;
// "status" exits with argv[3]; "logs" ends the whole
// stream mid-call; "end" makes attach say the job ended; "wait D" is
// silent for D, then exits 0 ("wait" never ends).
//
// Its attach answers Pings when heartbeat is set; otherwise it is an
// older attach, which ends the stream on a frame type it does not know.
// With idleCut set, the stream is cut as an idle-timeout proxy would:
// when nothing came from the host for that long.
type fakePod struct {
	session.Cluster
	attaches, direct atomic.Int32
	deletes, lists   atomic.Int32
	heartbeat        bool
	idleCut          time.Duration
	pings, noops     atomic.Int32 // Pings, and empty Stdin frames on channel 0
	cuts             atomic.Int32
}

func (f *fakePod) Delete(ctx context.Context, p poolapi.Pod) error {
	f.deletes.Add(1)
	return nil
}

func (f *fakePod) PodsOfJob(ctx context.Context, o poolapi.Owner) ([]poolapi.Pod, error) {
	f.lists.Add(1)
	return []poolapi.Pod{testPod}, nil
}

func (f *fakePod) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) < 5 || argv[2] != "attach" {
		f.direct.Add(1)
		if stdin != nil {
			_, _ = io.Copy(stdout, stdin)
		}
		return 0, nil
	}
	f.attaches.Add(1)
	w := muxproto.NewWriter(stdout)
	_ = w.WriteJSON(muxproto.TypeHello, 0, muxproto.Hello{Version: muxproto.Version, Job: argv[4], Heartbeat: f.heartbeat})
	r := muxproto.NewReader(stdin)
	if f.idleCut > 0 {
		in := &idleReader{r: stdin, cut: make(chan struct{})}
		r = muxproto.NewReader(in)
		stop := in.watch(f.idleCut, &f.cuts)
		defer stop()
	}
	argvOf := map[uint32][]string{}
	for {
		fr, err := r.Read()
		if err != nil {
			return 0, nil
		}
		switch fr.Type {
		case muxproto.TypePing:
			if !f.heartbeat {
				return 0, fmt.Errorf("unexpected %s frame from the host", fr.Type)
			}
			f.pings.Add(1)
			_ = w.Write(muxproto.TypePong, 0, fr.Payload)
		case muxproto.TypeOpen:
			var o muxproto.Open
			_ = json.Unmarshal(fr.Payload, &o)
			if len(o.Argv) < 3 {
				_ = w.WriteJSON(muxproto.TypeExit, fr.Channel, muxproto.Exit{Error: "bad argv", Refused: true})
				continue
			}
			argvOf[fr.Channel] = o.Argv
			switch o.Argv[2] {
			case "exec": // an attach older than job exec
				_ = w.WriteJSON(muxproto.TypeExit, fr.Channel, muxproto.Exit{Error: "job attach runs only the warmpod job commands of muxproto.Carried", Refused: true})
			case "status":
				code, _ := strconv.Atoi(o.Argv[3])
				_ = w.Write(muxproto.TypeStderr, fr.Channel, []byte("bye\n"))
				_ = w.WriteJSON(muxproto.TypeExit, fr.Channel, muxproto.Exit{Code: code})
			case "logs":
				_ = w.Write(muxproto.TypeStdout, fr.Channel, []byte("partial"))
				return 0, fmt.Errorf("stream cut")
			case "end":
				_ = w.WriteJSON(muxproto.TypeExit, fr.Channel, muxproto.Exit{Code: 0})
				_ = w.WriteJSON(muxproto.TypeBye, 0, muxproto.Bye{Reason: "job-ended"})
				return 0, nil
			case "wait":
				if len(o.Argv) < 4 {
					continue // never ends
				}
				d, _ := time.ParseDuration(o.Argv[3])
				go func(ch uint32) {
					time.Sleep(d)
					_ = w.WriteJSON(muxproto.TypeExit, ch, muxproto.Exit{Code: 0})
				}(fr.Channel)
			}
		case muxproto.TypeStdin:
			if fr.Channel == 0 && len(fr.Payload) == 0 {
				f.noops.Add(1)
				continue
			}
			if argvOf[fr.Channel][2] == "put" {
				_ = w.Write(muxproto.TypeStdout, fr.Channel, fr.Payload)
			}
		case muxproto.TypeStdinEOF:
			if argvOf[fr.Channel][2] == "put" {
				_ = w.WriteJSON(muxproto.TypeExit, fr.Channel, muxproto.Exit{Code: 0})
			}
		case muxproto.TypeClose:
			_ = w.WriteJSON(muxproto.TypeExit, fr.Channel, muxproto.Exit{Code: 137})
		}
	}
}

var testPod = poolapi.Pod{Name: "p-1", UID: "uid-1", Bin: "/warmpod/warmpod"}

// serve runs a Server for job j on a socket in a temporary directory and
// returns the socket, the fake pod and the channel Serve's reason comes on.
func serve(t *testing.T, idle time.Duration) (string, *fakePod, <-chan string) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, PrivateDir(filepath.Join(dir, "state")))
	sock := SocketPath(filepath.Join(dir, "state"), "job-1")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	fp := &fakePod{}
	srv := &Server{Cluster: fp, Pod: testPod, Job: "j1", Idle: idle, Reattach: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	reason, done := make(chan string, 1), make(chan struct{})
	go func() { reason <- srv.Serve(ctx, ln); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return")
		}
	})
	return sock, fp, reason
}

func client(sock, job string, fp *fakePod, log io.Writer) *Cluster {
	return &Cluster{Cluster: fp, Sock: sock, Job: job, Pod: testPod, Log: log}
}

func TestCallsShareOneStream(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	c := client(sock, "j1", fp, io.Discard)
	cases := []struct {
		argv     []string
		stdin    string
		code     int
		out, err string
	}{
		{[]string{"w", "job", "put"}, "script bytes", 0, "script bytes", ""},
		{[]string{"w", "job", "status", "3"}, "", 3, "", "bye\n"},
		{[]string{"w", "job", "put"}, strings.Repeat("x", 3*muxproto.MaxData+1), 0, strings.Repeat("x", 3*muxproto.MaxData+1), ""},
	}
	for _, tc := range cases {
		var out, errb bytes.Buffer
		var in io.Reader
		if tc.stdin != "" {
			in = strings.NewReader(tc.stdin)
		}
		code, err := c.Exec(context.Background(), testPod, tc.argv, in, &out, &errb)
		require.NoError(t, err, tc.argv)
		assert.Equal(t, tc.code, code, tc.argv)
		assert.Equal(t, tc.out, out.String(), tc.argv)
		assert.Equal(t, tc.err, errb.String(), tc.argv)
	}
	assert.EqualValues(t, 1, fp.attaches.Load(), "one exec stream for every call")
	assert.Zero(t, fp.direct.Load())
	m, d := c.Calls()
	assert.EqualValues(t, 3, m)
	assert.Zero(t, d)
}

// A bulk call (session.BulkExecer: _work's pieces) never goes over the
// stream, where it would hold up the job's other calls: it is a direct
// exec, counted as one.
func TestBulkCallsGoDirect(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	c := client(sock, "j1", fp, io.Discard)
	// The server opens its stream at once, in the background: a call over
	// it first, so that the count of streams is settled before the bulk
	// call (CI saw the eager attach land after an unsettled check).
	code, err := c.Exec(context.Background(), testPod, []string{"w", "job", "status", "0"}, nil, io.Discard, io.Discard)
	require.NoError(t, err)
	require.Zero(t, code)
	require.EqualValues(t, 1, fp.attaches.Load())
	code, err = session.BulkExec(c)(context.Background(), testPod, []string{"w", "job", "put"}, strings.NewReader("piece"), io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.EqualValues(t, 1, fp.direct.Load())
	assert.EqualValues(t, 1, fp.attaches.Load(), "no stream opened for it")
	m, d := c.Calls()
	assert.EqualValues(t, 1, m)
	assert.EqualValues(t, 1, d)
}

// A call the pod's attach refuses after the multiplexer took it (an
// older warmpod that does not carry the command) is ErrRefused, for the
// caller to send another way; the stream stays up for the others.
func TestARefusedCallIsErrRefused(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	c := client(sock, "j1", fp, io.Discard)
	_, err := c.Exec(context.Background(), testPod, []string{"w", "job", "exec", "--job", "j1", "--", "sh"}, strings.NewReader("x"), io.Discard, io.Discard)
	require.ErrorIs(t, err, ErrRefused)
	code, err := c.Exec(context.Background(), testPod, []string{"w", "job", "status", "0"}, nil, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.EqualValues(t, 1, fp.attaches.Load())
}

func TestConcurrentCalls(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	c := client(sock, "j1", fp, io.Discard)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			msg := strings.Repeat(strconv.Itoa(i), 100000)
			code, err := c.Exec(context.Background(), testPod, []string{"w", "job", "put"}, strings.NewReader(msg), &out, io.Discard)
			assert.NoError(t, err)
			assert.Zero(t, code)
			assert.Equal(t, msg, out.String(), "call %d got its own output only", i)
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, fp.attaches.Load())
}

func TestFallsBackToDirectExec(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	cases := []struct {
		name string
		c    *Cluster
		pod  poolapi.Pod
		says string
	}{
		{"no socket", client(sock+".missing", "j1", fp, nil), testPod, "no such file"},
		{"another job's multiplexer", client(sock, "j2", fp, nil), testPod, "serves job j1"},
		{"another pod", client(sock, "j1", fp, nil), poolapi.Pod{Name: "p-2", UID: "uid-2"}, ""},
		{"not a warmpod job command", client(sock, "j1", fp, nil), testPod, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			tc.c.Log = &log
			before := fp.direct.Load()
			var out bytes.Buffer
			argv := []string{"w", "job", "put"}
			if tc.name == "not a warmpod job command" {
				argv = []string{"sh", "-c", "cat"}
			}
			code, err := tc.c.Exec(context.Background(), tc.pod, argv, strings.NewReader("same stdin"), &out, io.Discard)
			require.NoError(t, err)
			assert.Zero(t, code)
			assert.Equal(t, "same stdin", out.String(), "the direct exec got all of stdin")
			assert.Equal(t, before+1, fp.direct.Load())
			assert.Contains(t, log.String(), tc.says)
		})
	}
}

func TestStreamCutFailsTheCallThenReattaches(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	c := client(sock, "j1", fp, io.Discard)
	var out bytes.Buffer
	_, err := c.Exec(context.Background(), testPod, []string{"w", "job", "logs"}, nil, &out, io.Discard)
	require.ErrorContains(t, err, "broke", "a broken stream, for the stage to reattach")
	assert.Equal(t, "partial", out.String())
	out.Reset()
	code, err := c.Exec(context.Background(), testPod, []string{"w", "job", "put"}, strings.NewReader("again"), &out, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.Equal(t, "again", out.String())
	assert.EqualValues(t, 2, fp.attaches.Load(), "reattached")
	assert.Zero(t, fp.direct.Load(), "still through the multiplexer")
}

func TestClientGoneStopsTheCall(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	c := client(sock, "j1", fp, io.Discard)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.Exec(ctx, testPod, []string{"w", "job", "wait"}, nil, io.Discard, io.Discard)
	require.Error(t, err)
	// The multiplexer still serves the next call.
	code, err := c.Exec(context.Background(), testPod, []string{"w", "job", "status", "0"}, nil, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, code)
}

func TestServeEnds(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		sock, _, reason := serve(t, time.Minute)
		Stop(sock, "j1", testPod, nil)
		assert.Equal(t, "shutdown", <-reason)
	})
	t.Run("idle", func(t *testing.T) {
		_, _, reason := serve(t, 100*time.Millisecond)
		select {
		case r := <-reason:
			assert.Equal(t, "idle", r)
		case <-time.After(5 * time.Second):
			t.Fatal("an idle multiplexer did not exit")
		}
	})
	t.Run("job ended in the pod", func(t *testing.T) {
		sock, fp, reason := serve(t, time.Minute)
		_, err := client(sock, "j1", fp, nil).Exec(context.Background(), testPod, []string{"w", "job", "end"}, nil, io.Discard, io.Discard)
		require.NoError(t, err)
		assert.Equal(t, "job-ended", <-reason)
	})
}

func TestSocketPathAndEnv(t *testing.T) {
	a, b := SocketPath("/d", "gitlab/1/x"), SocketPath("/d", "gitlab/2/x")
	assert.NotEqual(t, a, b)
	assert.Equal(t, len(a), len(SocketPath("/d", strings.Repeat("k", 500))), "fixed length whatever the key")
	env := Env([]string{"PATH=/bin", "CUSTOM_ENV_CI_JOB_TOKEN=secret", "KUBECONFIG=/k", "WARMPOD_GITLAB_POOLS=p", "GITHUB_TOKEN=t"}, "WARMPOD_GITLAB_")
	assert.Equal(t, []string{"PATH=/bin", "KUBECONFIG=/k", "WARMPOD_GITLAB_POOLS=p"}, env, "no job variable, no token")
}

func TestPrivateDirRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	require.NoError(t, PrivateDir(dir))
	require.NoError(t, osChmod(dir, 0o755))
	require.ErrorContains(t, PrivateDir(dir), "mode 0700")
}

var osChmod = os.Chmod

func TestCleanupRequestsUseTheMultiplexersConnection(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	direct := &fakePod{}
	c := client(sock, "j1", direct, io.Discard)
	require.NoError(t, c.Delete(context.Background(), testPod))
	pods, err := c.PodsOfJob(context.Background(), poolapi.Owner{Job: "j1"})
	require.NoError(t, err)
	assert.Equal(t, []poolapi.Pod{testPod}, pods)
	assert.EqualValues(t, 1, fp.deletes.Load())
	assert.EqualValues(t, 1, fp.lists.Load())
	assert.Zero(t, direct.deletes.Load()+direct.lists.Load(), "nothing went direct")

	// Another job's pods, another pod: never through this multiplexer.
	_, err = c.PodsOfJob(context.Background(), poolapi.Owner{Runner: "r"})
	require.NoError(t, err)
	require.NoError(t, c.Delete(context.Background(), poolapi.Pod{Name: "p-2", UID: "uid-2"}))
	assert.EqualValues(t, 1, direct.deletes.Load())
	assert.EqualValues(t, 1, direct.lists.Load())
	assert.EqualValues(t, 1, fp.deletes.Load()+fp.lists.Load()-1)
}

// A client that stops reading its call's output holds up no other call:
// its queue fills, and it is dropped.
func TestAClientThatDoesNotReadHoldsUpNobody(t *testing.T) {
	sock, fp, _ := serve(t, time.Minute)
	conn, err := net.Dial("unix", sock)
	require.NoError(t, err)
	defer conn.Close()
	w := muxproto.NewWriter(conn)
	require.NoError(t, w.WriteJSON(muxproto.TypeHello, 0, muxproto.Hello{Version: muxproto.Version, Job: "j1", PodUID: "uid-1"}))
	require.NoError(t, w.WriteJSON(muxproto.TypeOpen, 0, muxproto.Open{Argv: []string{"w", "job", "put"}}))
	go func() {
		// 32 MiB echoed back and never read: more than the route's queue
		// and the socket's buffers hold.
		chunk := make([]byte, muxproto.MaxData)
		for range 512 {
			if w.Write(muxproto.TypeStdin, 0, chunk) != nil {
				return
			}
		}
	}()
	// A hang guard, not a timing: the call must come back at all.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		code, err := client(sock, "j1", fp, io.Discard).Exec(ctx, testPod, []string{"w", "job", "status", "0"}, nil, io.Discard, io.Discard)
		require.NoError(t, err)
		assert.Zero(t, code)
	}
}

// A header that claims the largest payload, then a stream that ends: an
// error at once (the payload grows only as its bytes come).
func TestAHeaderWithoutItsPayloadIsAnError(t *testing.T) {
	var hdr [muxproto.HeaderSize]byte
	hdr[0] = byte(muxproto.TypeHello)
	hdr[6] = 0x10 // 1 MiB, big-endian
	r, w := io.Pipe()
	go func() { _, _ = w.Write(hdr[:]); _ = w.Close() }()
	_, err := muxproto.NewReader(r).Read()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a short payload is an error, not a wait or an allocation")
}

// refusingPod's warmpod has no attach (an older image): exit 2, once
// gate is closed.
type refusingPod struct {
	fakePod
	gate chan struct{}
}

func (f *refusingPod) Exec(ctx context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if len(argv) >= 3 && argv[2] == "attach" {
		<-f.gate
		f.attaches.Add(1)
		fmt.Fprintln(stderr, `warmpod: unknown job command "attach"`)
		return 2, nil
	}
	return f.fakePod.Exec(ctx, p, argv, stdin, stdout, stderr)
}

// A pod that refuses attach ends the multiplexer at once (no retries for
// the reattach bound), and the call goes direct.
func TestAPodWithoutAttachEndsTheMultiplexer(t *testing.T) {
	dir := t.TempDir()
	sock := SocketPath(dir, "k")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	require.NoError(t, err)
	fp := &refusingPod{gate: make(chan struct{})}
	srv := &Server{Cluster: fp, Pod: testPod, Job: "j1", Reattach: time.Hour}
	reason := make(chan string, 1)
	go func() { reason <- srv.Serve(context.Background(), ln) }()
	// The pod answers once the call is in (the call waits for the stream).
	go func() {
		for {
			srv.mu.Lock()
			in := srv.active > 0
			srv.mu.Unlock()
			if in {
				close(fp.gate)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var log bytes.Buffer
	code, err := client(sock, "j1", &fp.fakePod, &log).Exec(context.Background(), testPod, []string{"w", "job", "status", "0"}, nil, io.Discard, io.Discard)
	require.NoError(t, err)
	assert.Zero(t, code)
	assert.EqualValues(t, 1, fp.direct.Load(), "the call went direct")
	assert.Contains(t, log.String(), "exit 2")
	assert.Contains(t, <-reason, "refused the stream")
	assert.EqualValues(t, 1, fp.attaches.Load(), "one attempt, not a retry loop")
}

func TestCheckHello(t *testing.T) {
	s := &Server{Pod: testPod, Job: "7"}
	frame := func(payload string) muxproto.Frame {
		return muxproto.Frame{Type: muxproto.TypeHello, Payload: []byte(payload)}
	}
	hello := func(h muxproto.Hello) muxproto.Frame {
		b, err := json.Marshal(h)
		require.NoError(t, err)
		return frame(string(b))
	}
	uid := string(testPod.UID)
	for _, tc := range []struct {
		name    string
		f       muxproto.Frame
		wantErr string // "" = served
	}{
		{"ours", hello(muxproto.Hello{Version: muxproto.Version, Job: "7", PodUID: uid}), ""},
		{"undecodable", frame("{"), "muxproto: bad hello frame"},
		{"other version", hello(muxproto.Hello{Version: muxproto.Version + 1, Job: "7", PodUID: uid}), fmt.Sprintf("wire version %d, not %d", muxproto.Version+1, muxproto.Version)},
		{"other job", hello(muxproto.Hello{Version: muxproto.Version, Job: "8", PodUID: uid}), "this multiplexer serves job 7 in pod " + testPod.Name + ", not job 8 in pod uid " + uid},
		{"other pod", hello(muxproto.Hello{Version: muxproto.Version, Job: "7", PodUID: "other"}), "not job 7 in pod uid other"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.checkHello(tc.f)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

// A Shutdown needs the Hello of the multiplexer's own job and pod, as
// every call does: without one, or after another job's, it is refused and
// the multiplexer goes on serving.
func TestShutdownNeedsTheJobsHello(t *testing.T) {
	sock, fp, reason := serve(t, time.Minute)
	hello := func(job, uid string) []muxproto.Frame {
		b, err := json.Marshal(muxproto.Hello{Version: muxproto.Version, Job: job, PodUID: uid})
		require.NoError(t, err)
		return []muxproto.Frame{{Type: muxproto.TypeHello, Payload: b}}
	}
	shutdown := muxproto.Frame{Type: muxproto.TypeShutdown}
	for _, tc := range []struct {
		name   string
		frames []muxproto.Frame
		says   string
	}{
		{"no hello", []muxproto.Frame{shutdown}, "begins with hello, not shutdown"},
		{"another job's hello", append(hello("j2", "uid-1"), shutdown), "serves job j1"},
		{"another pod's hello", append(hello("j1", "uid-2"), shutdown), "not job j1 in pod uid uid-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("unix", sock)
			require.NoError(t, err)
			defer conn.Close()
			w := muxproto.NewWriter(conn)
			for _, f := range tc.frames {
				// The multiplexer may close after the refused Hello,
				// before the Shutdown is written: its answer says why.
				_ = w.Write(f.Type, f.Channel, f.Payload)
			}
			f, err := muxproto.NewReader(conn).Read()
			require.NoError(t, err)
			require.Equal(t, muxproto.TypeExit, f.Type, "a refusal, not a bye")
			var x muxproto.Exit
			require.NoError(t, muxproto.Decode(f, &x))
			assert.True(t, x.Refused)
			assert.Contains(t, x.Error, tc.says)
			// Still serving.
			code, err := client(sock, "j1", fp, io.Discard).Exec(context.Background(), testPod, []string{"w", "job", "status", "0"}, nil, io.Discard, io.Discard)
			require.NoError(t, err)
			assert.Zero(t, code)
			select {
			case r := <-reason:
				t.Fatalf("the multiplexer ended: %s", r)
			default:
			}
		})
	}
	assert.Zero(t, fp.direct.Load(), "every call went through the multiplexer")
	Stop(sock, "j1", testPod, nil)
	assert.Equal(t, "shutdown", <-reason, "its own job's Hello and a Shutdown stop it")
}

// A state directory the multiplexer cannot use is said once per job on
// the warning writer, with its fix; a missing one is made 0700.
func TestTheStateDirectory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		warn  string // "" = usable
	}{
		{"missing: made 0700", func(t *testing.T, dir string) {}, ""},
		{"0755", func(t *testing.T, dir string) { require.NoError(t, os.Mkdir(dir, 0o755)) }, "fix: chmod 700 "},
		{"another uid's", func(t *testing.T, dir string) {
			if os.Getuid() != 0 {
				t.Skip("chown needs root")
			}
			require.NoError(t, os.Mkdir(dir, 0o700))
			require.NoError(t, os.Chown(dir, 65534, 65534))
		}, "fix: point --state-dir at a directory of uid 0's own"},
		{"a file", func(t *testing.T, dir string) { require.NoError(t, os.WriteFile(dir, nil, 0o600)) }, "fix: point --state-dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "state")
			require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
			tc.setup(t, dir)
			// A binary that exits at once: the multiplexer never listens.
			l := &Launcher{Argv: []string{"/bin/true"}, Dir: dir}
			e := l.Early("k")
			defer e.Close()
			var log, warn bytes.Buffer
			attach := e.Attacher(&fakePod{}, "j1", &log, &warn)
			for range 2 { // a second pod: the first did not take the job
				cl, _ := attach(testPod)
				_, viaMux := cl.(*Cluster)
				assert.False(t, viaMux, "no multiplexer: direct")
			}
			if tc.warn == "" {
				fi, err := os.Stat(dir)
				require.NoError(t, err)
				assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
				assert.Empty(t, warn.String())
				assert.Contains(t, log.String(), "did not start", "the stand-in binary exits at once")
				return
			}
			assert.Equal(t, 1, strings.Count(warn.String(), "\n"), "once per job: %s", warn.String())
			assert.Contains(t, warn.String(), "every call execs directly")
			assert.Contains(t, warn.String(), tc.warn)
			assert.Empty(t, log.String(), "said on warn, not on the debug log")
		})
	}
}

// idleReader is the host's side of a fake stream behind an idle-timeout
// proxy: when no byte has come for the bound, the stream is cut (Read
// fails) and the cut counted.
type idleReader struct {
	r    io.Reader
	last atomic.Int64 // unix nanoseconds of the last byte
	cut  chan struct{}
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.last.Store(time.Now().UnixNano())
	}
	select {
	case <-i.cut:
		return 0, errors.New("cut: idle")
	default:
	}
	return n, err
}

// watch cuts the stream after d without a byte; stop ends the watch.
func (i *idleReader) watch(d time.Duration, cuts *atomic.Int32) (stop func()) {
	i.last.Store(time.Now().UnixNano())
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(d / 20)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if time.Since(time.Unix(0, i.last.Load())) > d {
				cuts.Add(1)
				close(i.cut)
				if c, ok := i.r.(io.Closer); ok {
					_ = c.Close()
				}
				return
			}
		}
	}()
	return func() { close(done) }
}

// A call silent for longer than the stream's idle timeout keeps its
// stream when the heartbeat is on, whether attach answers it (a Ping) or
// is an older one that would end the stream on a Ping (an empty Stdin on
// channel 0). Without the heartbeat the idle stream is cut: the call
// fails as a broken stream.
func TestTheHeartbeatKeepsASilentStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		heartbeat time.Duration
		answers   bool
		cut       bool
	}{
		{"attach answers pings", 20 * time.Millisecond, true, false},
		{"an older attach", 20 * time.Millisecond, false, false},
		{"no heartbeat", -1, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sock := SocketPath(dir, "k")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			require.NoError(t, err)
			// The stream is cut after 1 s without a byte from the host;
			// the call is silent for 2.5 s.
			fp := &fakePod{heartbeat: tc.answers, idleCut: time.Second}
			srv := &Server{Cluster: fp, Pod: testPod, Job: "j1", Heartbeat: tc.heartbeat}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.Serve(ctx, ln); close(done) }()
			defer func() { cancel(); <-done }()
			_, err = client(sock, "j1", fp, io.Discard).Exec(context.Background(), testPod, []string{"w", "job", "wait", "2500ms"}, nil, io.Discard, io.Discard)
			if tc.cut {
				require.ErrorContains(t, err, "broke", "the idle stream was cut")
				assert.Positive(t, fp.cuts.Load())
				return
			}
			require.NoError(t, err)
			assert.Zero(t, fp.cuts.Load(), "the stream was never idle")
			assert.EqualValues(t, 1, fp.attaches.Load(), "one stream throughout")
			if tc.answers {
				assert.Positive(t, fp.pings.Load())
				assert.Zero(t, fp.noops.Load())
				srv.mu.Lock()
				st := srv.stream
				srv.mu.Unlock()
				assert.Positive(t, st.pongs.Load(), "attach's answers came back")
			} else {
				assert.Zero(t, fp.pings.Load(), "no frame an older attach does not know")
				assert.Positive(t, fp.noops.Load())
			}
		})
	}
}
