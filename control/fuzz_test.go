package control

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzReadRequest feeds arbitrary bytes to the control-frame reader PID 1
// runs on every connection: it must never panic, accept only a line of at
// most MaxRequestBytes, and never quote the input in an error (a frame may
// carry a job spec with a token). A request it accepts survives a
// marshal → read round trip unchanged (as encoded).
func FuzzReadRequest(f *testing.F) {
	for _, seed := range []string{
		`{"op":"job.start","spec":{"id":"a","token":"t"}}` + "\n",
		`{"op":"job.put","job":"a","path":"/up/.x.tmp-0123456789abcdef"}`,
		`{"op":"status"}` + "\n" + `{"op":"status"}`,
		`{"op":"job.end","job":"a","spec":null}`,
		`{"op":1}`, `[]`, `null`, "", "\n", "{", `{"op":"x"} trailing`,
		`{"op":"job.stage","argv":["sh","-c","echo"],"duration":"1s","sha256":"00"}`,
		"\xff\xfe{}\n", `{"spec":` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		secret := "S3CR3T-" + string(rune('A'+len(in)%26))
		framed := bytes.ReplaceAll(in, []byte("SECRET"), []byte(secret))
		req, err := ReadRequest(bufio.NewReaderSize(bytes.NewReader(framed), 64<<10))
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "bad request: "), err.Error())
			require.NotContains(t, err.Error(), secret, "the error quotes the input")
			require.Less(t, len(err.Error()), 200)
			return
		}
		line, _, _ := bytes.Cut(framed, []byte("\n"))
		require.LessOrEqual(t, len(line), MaxRequestBytes)
		b, merr := json.Marshal(req)
		require.NoError(t, merr)
		again, err := ReadRequest(bufio.NewReader(bytes.NewReader(append(b, '\n'))))
		require.NoError(t, err, "%s", b)
		// Compared as encoded: an empty argv and a missing one are the
		// same request (omitempty).
		b2, merr := json.Marshal(again)
		require.NoError(t, merr)
		require.Equal(t, string(b), string(b2))
	})
}

func TestReadRequestLimits(t *testing.T) {
	big := `{"op":"job.start","spec":"` + strings.Repeat("x", MaxRequestBytes) + `"}` + "\n"
	_, err := ReadRequest(bufio.NewReaderSize(strings.NewReader(big), 64<<10))
	require.ErrorContains(t, err, "longer than")
	_, err = ReadRequest(bufio.NewReader(strings.NewReader("")))
	require.ErrorContains(t, err, "bad request: EOF")
	r, err := ReadRequest(bufio.NewReader(strings.NewReader(`{"op":"status"}`)))
	require.NoError(t, err)
	require.Equal(t, OpStatus, r.Op)
}

func TestReadLineBudget(t *testing.T) {
	var held int
	reserve := func(budget int) func(int) bool {
		return func(n int) bool {
			if n > 0 && held+n > budget {
				return false
			}
			held += n
			return true
		}
	}
	long := strings.Repeat("x", 20<<10) + "\n"
	_, err := readRequest(bufio.NewReaderSize(strings.NewReader(long), 4096), reserve(10<<10))
	require.ErrorIs(t, err, errBudget)
	require.Zero(t, held, "a refused line gave back its budget")

	_, err = readRequest(bufio.NewReaderSize(strings.NewReader(`{"op":"status"}`+"\n"), 4096), reserve(0))
	require.NoError(t, err, "a small request needs no budget")
	require.Zero(t, held, "a read line gave back its budget")
	_, err = readRequest(bufio.NewReaderSize(strings.NewReader(`{"op":"status","dir":"`+strings.Repeat("d", 8000)+`"}`+"\n"), 4096), reserve(1<<20))
	require.NoError(t, err)
	require.Zero(t, held, "a larger read line gave back its budget")

	_, err = readRequest(bufio.NewReaderSize(strings.NewReader(strings.Repeat("y", 5000)), 4096), reserve(1<<20))
	require.Error(t, err, "not JSON")
	require.Zero(t, held)
}
