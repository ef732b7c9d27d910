package podexec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/executor/session"
	"github.com/warmpod/warmpod/poolapi"
)

// TestMain doubles as the child: with EnvRequest set, the test binary is
// `pod-exec` over childCluster.
func TestMain(m *testing.M) {
	if req, ok := os.LookupEnv(EnvRequest); ok {
		var err error
		if e := os.Getenv("TEST_CONNECT_ERR"); e != "" {
			err = errors.New(e)
		}
		os.Exit(Serve(context.Background(), childCluster{}, err, req, os.Stdin, os.Stdout, os.Stderr, os.NewFile(3, "result")))
	}
	os.Exit(m.Run())
}

// childCluster echoes an exec's stdin with its argv, exits with argv[1]
// as a number, and breaks the stream for "broken".
type childCluster struct{}

func (childCluster) Exec(_ context.Context, p poolapi.Pod, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	if argv[1] == "broken" {
		return -1, errors.New("stream reset")
	}
	var b []byte
	if len(argv) > 2 && argv[2] == "head3" {
		// As job stage reads its script: exactly its size, not to EOF.
		b = make([]byte, 3)
		_, _ = io.ReadFull(stdin, b)
	} else {
		b, _ = io.ReadAll(stdin)
	}
	_, _ = io.WriteString(stdout, p.Name+" "+strings.Join(argv, " ")+" <"+string(b)+">")
	_, _ = io.WriteString(stderr, "err-line")
	return strconv.Atoi(argv[1])
}

func (childCluster) Delete(_ context.Context, p poolapi.Pod) error {
	if p.Name == "gone" {
		return errors.New("forbidden")
	}
	return nil
}

func (childCluster) PodsOfJob(_ context.Context, o poolapi.Owner) ([]poolapi.Pod, error) {
	return []poolapi.Pod{{Name: "p-" + o.Job, UID: "u"}}, nil
}

func client(env ...string) *Client {
	return &Client{Argv: []string{os.Args[0], "-test.run=^$"}, Env: append(os.Environ(), env...)}
}

// Each call goes through a child and comes back as the child's cluster
// answered it: exit code, output streams, the stream's failure (retried
// by RunStage) apart from a client that never came up (not retried).
func TestCallsGoThroughAChild(t *testing.T) {
	ctx := context.Background()
	pod := poolapi.Pod{Name: "w1", UID: "u1", Bin: "/w/warmpod"}
	var out, errb bytes.Buffer
	code, err := client().Exec(ctx, pod, []string{"warmpod", "3"}, strings.NewReader("script"), &out, &errb)
	require.NoError(t, err)
	assert.Equal(t, 3, code)
	assert.Equal(t, "w1 warmpod 3 <script>", out.String())
	assert.Equal(t, "err-line", errb.String())

	code, err = client().ExecBulk(ctx, pod, []string{"warmpod", "0"}, nil, io.Discard, io.Discard)
	assert.NoError(t, err)
	assert.Equal(t, 0, code)

	_, err = client().Exec(ctx, pod, []string{"warmpod", "broken"}, nil, io.Discard, io.Discard)
	require.ErrorContains(t, err, "stream reset")
	var se *session.SystemError
	assert.False(t, errors.As(err, &se), "a broken stream is retried")

	_, err = client("TEST_CONNECT_ERR=kubeconfig: none").Exec(ctx, pod, []string{"warmpod", "0"}, nil, io.Discard, io.Discard)
	require.ErrorContains(t, err, "kubeconfig: none")
	assert.True(t, errors.As(err, &se), "no client: never began")

	assert.NoError(t, client().Delete(ctx, pod))
	assert.ErrorContains(t, client().Delete(ctx, poolapi.Pod{Name: "gone"}), "forbidden")
	pods, err := client().PodsOfJob(ctx, poolapi.Owner{Job: "7"})
	require.NoError(t, err)
	assert.Equal(t, []poolapi.Pod{{Name: "p-7", UID: "u"}}, pods)
}

// A child that cannot start is an exec that never began; one that
// started and gave no result is a call of unknown fate (reattached, as a
// broken stream is).
func TestAChildWithoutAResult(t *testing.T) {
	var se *session.SystemError
	_, err := (&Client{Argv: []string{"/nonexistent/warmpod-github"}}).Exec(context.Background(), poolapi.Pod{}, []string{"x", "0"}, nil, io.Discard, io.Discard)
	assert.True(t, errors.As(err, &se), "%v", err)
	_, err = (&Client{Argv: []string{"/bin/true"}}).Exec(context.Background(), poolapi.Pod{}, []string{"x", "0"}, nil, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "gave no result")
	assert.False(t, errors.As(err, &se), "%v", err)
}

// heldOpen is a stdin that, like a stage's script reader, gives its bytes
// and then blocks until released: the call must end without its EOF.
type heldOpen struct {
	b       []byte
	release chan struct{}
}

func (h *heldOpen) Read(p []byte) (int, error) {
	if len(h.b) > 0 {
		n := copy(p, h.b)
		h.b = h.b[n:]
		return n, nil
	}
	<-h.release
	return 0, io.EOF
}

// A stdin held open after its bytes does not keep the call from ending
// when the child has.
func TestAStdinHeldOpenDoesNotHoldTheCall(t *testing.T) {
	in := &heldOpen{b: []byte("abc"), release: make(chan struct{})}
	defer close(in.release)
	done := make(chan struct{})
	var out bytes.Buffer
	var code int
	var err error
	go func() {
		defer close(done)
		code, err = client().Exec(context.Background(), poolapi.Pod{Name: "w"}, []string{"warmpod", "0", "head3"}, in, &out, io.Discard)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the call did not end while its stdin was held open")
	}
	require.NoError(t, err)
	assert.Equal(t, 0, code)
	assert.Contains(t, out.String(), "<abc>")
}
