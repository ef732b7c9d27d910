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
	b, _ := io.ReadAll(stdin)
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

// A child that cannot start, or dies without a result, is an exec that
// never began.
func TestAChildWithoutAResult(t *testing.T) {
	var se *session.SystemError
	_, err := (&Client{Argv: []string{"/nonexistent/warmpod-github"}}).Exec(context.Background(), poolapi.Pod{}, []string{"x", "0"}, nil, io.Discard, io.Discard)
	assert.True(t, errors.As(err, &se), "%v", err)
	_, err = (&Client{Argv: []string{"/bin/true"}}).Exec(context.Background(), poolapi.Pod{}, []string{"x", "0"}, nil, io.Discard, io.Discard)
	assert.True(t, errors.As(err, &se), "%v", err)
	assert.ErrorContains(t, err, "gave no result")
}
