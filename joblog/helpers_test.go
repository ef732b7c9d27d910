package joblog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// record is one parsed output record.
type record struct {
	off  int64
	line string
}

// parseOutput splits Read's output into records; every record must be
// complete (end with '\n').
func parseOutput(t testing.TB, out []byte) []record {
	t.Helper()
	if len(out) == 0 {
		return nil
	}
	require.Equal(t, byte('\n'), out[len(out)-1], "output must end with a complete record")
	lines := bytes.Split(out[:len(out)-1], []byte{'\n'})
	recs := make([]record, 0, len(lines))
	for _, l := range lines {
		off, line, err := ParseRecord(string(l))
		require.NoError(t, err)
		recs = append(recs, record{off, line})
	}
	return recs
}

// completeRecords returns the records of out up to its last '\n' (what an
// executor keeps when a stream breaks mid-record).
func completeRecords(t testing.TB, out []byte) []record {
	t.Helper()
	i := bytes.LastIndexByte(out, '\n')
	return parseOutput(t, out[:i+1])
}

// reassemble applies the documented rule: a record consumed
// n = offset - prev file bytes; n == len(line)+1 means line + '\n',
// n == len(line) (and n > 0) means line alone (the reader added the '\n').
func reassemble(t testing.TB, start int64, recs []record) []byte {
	t.Helper()
	b, err := reassembleErr(start, recs)
	require.NoError(t, err)
	return b
}

func reassembleErr(start int64, recs []record) ([]byte, error) {
	var b []byte
	prev := start
	for i, r := range recs {
		switch n := r.off - prev; {
		case n == int64(len(r.line))+1:
			b = append(b, r.line...)
			b = append(b, '\n')
		case n == int64(len(r.line)) && n > 0:
			b = append(b, r.line...)
		default:
			return nil, fmt.Errorf("record %d: offset %d after %d but line has %d bytes", i, r.off, prev, len(r.line))
		}
		prev = r.off
	}
	return b, nil
}

// requireSameBytes compares without dumping megabytes on failure.
func requireSameBytes(t testing.TB, want, got []byte, msg string) {
	t.Helper()
	if bytes.Equal(want, got) {
		return
	}
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	require.Failf(t, "bytes differ", "%s: len want %d got %d, first difference at byte %d", msg, len(want), len(got), i)
}

// genLog builds a log of about size bytes: lines of random lengths (many
// empty, some long, one longer than 3*maxLine, one of exactly maxLine and
// one of maxLine+1 bytes), arbitrary bytes except '\n', and a last line
// without '\n'.
func genLog(rng *rand.Rand, size, maxLine int) []byte {
	b := make([]byte, 0, size+4*maxLine)
	line := func(n int) {
		for range n {
			c := byte(rng.IntN(256))
			if c == '\n' {
				c = ' '
			}
			b = append(b, c)
		}
	}
	special := []int{3*maxLine + 17, maxLine, maxLine + 1, maxLine - 1}
	for len(b) < size {
		var n int
		switch k := rng.IntN(100); {
		case k < 15:
			n = 0
		case k < 90:
			n = rng.IntN(120)
		case k < 99:
			n = rng.IntN(4000)
		default:
			n = rng.IntN(2 * maxLine)
		}
		if len(special) > 0 && rng.IntN(200) == 0 {
			n, special = special[0], special[1:]
		}
		line(n)
		b = append(b, '\n')
	}
	for _, n := range special {
		line(n)
		b = append(b, '\n')
	}
	line(77) // partial last line
	return b
}

func writeFile(t testing.TB, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "output.log")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

func seeded(t testing.TB) *rand.Rand {
	seed := uint64(20260301)
	if s := os.Getenv("JOBLOG_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("seed %d (set JOBLOG_SEED to change)", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
