package probe

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// kubeletRequest is what the kubelet's HTTP prober sends (Go's client with
// keep-alive off).
const kubeletRequest = "GET /readyz HTTP/1.1\r\nHost: 10.0.0.7:9898\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n"

// parseCase is one request head and what readRequest makes of it: status
// 0 for a request it accepts (then method, path, query, minor, close and
// bodyLen), else the status it is refused with.
type parseCase struct {
	name    string
	in      string
	status  int
	method  string
	path    string
	query   string
	minor   int
	close   bool
	bodyLen int
}

// parseCases are the valid shapes probers send and every malformed class
// the server must refuse; the fuzzers use them as seeds too.
func parseCases() []parseCase {
	big := strings.Repeat("a", maxHead)
	var many strings.Builder
	for i := 0; i <= maxFields; i++ {
		many.WriteString("X-A: b\r\n")
	}
	return []parseCase{
		// Valid.
		{name: "kubelet", in: kubeletRequest, method: "GET", path: "/readyz", minor: 1, close: true},
		{name: "go client keep-alive", in: "GET /livez HTTP/1.1\r\nHost: 127.0.0.1:9898\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n", method: "GET", path: "/livez", minor: 1},
		{name: "HEAD", in: "HEAD /livez HTTP/1.1\r\nHost: x\r\n\r\n", method: "HEAD", path: "/livez", minor: 1},
		{name: "HTTP/1.0 closes", in: "GET /livez HTTP/1.0\r\n\r\n", method: "GET", path: "/livez", close: true},
		{name: "HTTP/1.0 keep-alive still closes", in: "GET /livez HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", method: "GET", path: "/livez", close: true},
		{name: "HTTP/1.0 Expect ignored", in: "GET /livez HTTP/1.0\r\nExpect: x\r\n\r\n", method: "GET", path: "/livez", close: true},
		{name: "HTTP/1.1 minor 9 as 1.1", in: "GET /livez HTTP/1.9\r\nHost: x\r\n\r\n", method: "GET", path: "/livez", minor: 9},
		{name: "bare LF", in: "GET /livez HTTP/1.1\nHost: x\n\n", method: "GET", path: "/livez", minor: 1},
		{name: "leading empty lines", in: "\r\n\r\nGET /livez HTTP/1.1\r\nHost: x\r\n\r\n", method: "GET", path: "/livez", minor: 1},
		{name: "connection list, case", in: "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: Upgrade ,  CLOSE\r\n\r\n", method: "GET", path: "/livez", minor: 1, close: true},
		{name: "field names case-insensitive, OWS", in: "GET /livez HTTP/1.1\r\nhOsT:x\r\nconnection:\t close \t\r\n\r\n", method: "GET", path: "/livez", minor: 1, close: true},
		{name: "query", in: "GET /livez?verbose&exclude=a%2Cb HTTP/1.1\r\nHost: x\r\n\r\n", method: "GET", path: "/livez", query: "verbose&exclude=a%2Cb", minor: 1},
		{name: "escaped path", in: "GET /live%7a HTTP/1.1\r\nHost: x\r\n\r\n", method: "GET", path: "/livez", minor: 1},
		{name: "absolute-form", in: "GET http://10.0.0.7:9898/livez?verbose HTTP/1.1\r\nHost: 10.0.0.7:9898\r\n\r\n", method: "GET", path: "/livez", query: "verbose", minor: 1},
		{name: "absolute-form without path", in: "GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n", method: "GET", path: "/", minor: 1},
		{name: "absolute-form query only", in: "GET http://h?verbose HTTP/1.1\r\nHost: h\r\n\r\n", method: "GET", path: "/", query: "verbose", minor: 1},
		{name: "asterisk-form", in: "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", method: "OPTIONS", path: "*", minor: 1},
		{name: "authority-form", in: "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", method: "CONNECT", minor: 1},
		{name: "small body", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", method: "POST", path: "/livez", minor: 1, bodyLen: 5},
		{name: "repeated equal Content-Length", in: "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", method: "POST", path: "/x", minor: 1, bodyLen: 3},
		{name: "obs-text in a value", in: "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: caf\xc3\xa9\r\n\r\n", method: "GET", path: "/livez", minor: 1},
		{name: "non-ASCII in target", in: "GET /livez\xff HTTP/1.1\r\nHost: x\r\n\r\n", method: "GET", path: "/livez\xff", minor: 1},

		// Refused.
		{name: "HTTP/2 preface", in: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", status: 505},
		{name: "HTTP/3.0", in: "GET / HTTP/3.0\r\n\r\n", status: 505},
		{name: "HTTP/0.9", in: "GET /livez\r\n\r\n", status: 400},
		{name: "lower-case version", in: "GET /livez http/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "version with two digits", in: "GET /livez HTTP/1.10\r\nHost: x\r\n\r\n", status: 400},
		{name: "two spaces", in: "GET  /livez HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "trailing space", in: "GET /livez HTTP/1.1 \r\nHost: x\r\n\r\n", status: 400},
		{name: "tab separator", in: "GET\t/livez HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "garbage", in: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n", status: 400},
		{name: "NUL in method", in: "G\x00T /livez HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "NUL in target", in: "GET /li\x00vez HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "NUL in a value", in: "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", status: 400},
		{name: "bare CR in a value", in: "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", status: 400},
		{name: "bare CR ends the request line", in: "GET /livez HTTP/1.1\rHost: x\r\n\r\n", status: 400},
		{name: "header without colon", in: "GET /livez HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n", status: 400},
		{name: "space before colon", in: "GET /livez HTTP/1.1\r\nHost : x\r\n\r\n", status: 400},
		{name: "empty field name", in: "GET /livez HTTP/1.1\r\nHost: x\r\n: x\r\n\r\n", status: 400},
		{name: "obs-fold", in: "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", status: 400},
		{name: "obs-fold tab", in: "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n", status: 400},
		{name: "HTTP/1.1 without Host", in: "GET /livez HTTP/1.1\r\n\r\n", status: 400},
		{name: "two Hosts", in: "GET /livez HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", status: 400},
		{name: "target not a path", in: "GET livez HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "scheme without //", in: "GET http:/livez HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "bad escape in path", in: "GET /livez%zz HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "truncated escape in path", in: "GET /livez% HTTP/1.1\r\nHost: x\r\n\r\n", status: 400},
		{name: "negative Content-Length", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", status: 400},
		{name: "Content-Length list", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\n", status: 400},
		{name: "Content-Length overflow", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n", status: 400},
		{name: "same Content-Length, other digits", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 003\r\n\r\n", status: 400},
		{name: "conflicting Content-Length", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", status: 400},
		{name: "large body", in: "POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 4097\r\n\r\n", status: 413},
		{name: "chunked", in: "POST /livez HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", status: 501},
		{name: "chunked and Content-Length", in: "POST /livez HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", status: 400},
		{name: "unknown expectation", in: "GET /livez HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\n\r\n", status: 417},
		{name: "request line too long", in: "GET /" + big + " HTTP/1.1\r\nHost: x\r\n\r\n", status: 414},
		{name: "header too long", in: "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: " + big + "\r\n\r\n", status: 431},
		{name: "head too long in total", in: "GET /livez HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Some-Header: "+strings.Repeat("v", 50)+"\r\n", 70) + "\r\n", status: 431},
		{name: "too many fields", in: "GET /livez HTTP/1.1\r\nHost: x\r\n" + many.String() + "\r\n", status: 431},
		{name: "too many empty lines", in: strings.Repeat("\r\n", maxHead/2+1) + "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n", status: 414},
	}
}

func TestReadRequest(t *testing.T) {
	for _, tt := range parseCases() {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), maxHead)
			req, err := readRequest(br)
			if tt.status != 0 {
				var re *requestError
				require.True(t, errors.As(err, &re), "want a refusal, got %v (%+v)", err, req)
				require.Equal(t, tt.status, re.status, re.reason)
				require.Equal(t, tt.status, statusOf(err))
				require.NotContains(t, re.reason, "\n")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.method, req.method)
			require.Equal(t, tt.path, req.path)
			require.Equal(t, tt.query, req.rawQuery)
			require.Equal(t, tt.minor, req.minor)
			require.Equal(t, tt.close, req.close)
			require.Equal(t, tt.bodyLen, req.bodyLen)
		})
	}
}

// statusOf is the status a refusal maps to, 0 for anything else.
func statusOf(err error) int {
	var re *requestError
	if errors.As(err, &re) {
		return re.status
	}
	return 0
}

// A stream that ends is EOF before a request, an unexpected EOF inside one.
func TestReadRequestEnds(t *testing.T) {
	for in, want := range map[string]error{
		"":                                   io.EOF,
		"GET":                                io.ErrUnexpectedEOF,
		"\r\n":                               io.ErrUnexpectedEOF,
		"GET /livez HTTP/1.1\r\n":            io.ErrUnexpectedEOF,
		"GET /livez HTTP/1.1\r\nHost: x\r\n": io.ErrUnexpectedEOF,
	} {
		_, err := readRequest(bufio.NewReaderSize(strings.NewReader(in), maxHead))
		require.ErrorIs(t, err, want, "%q", in)
	}
}

// Requests one after another on one stream, as keep-alive and pipelining
// send them; readRequest reads nothing past each head.
func TestReadRequestSequence(t *testing.T) {
	in := "GET /livez HTTP/1.1\r\nHost: x\r\n\r\nPOST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcHEAD /readyz HTTP/1.1\nHost: x\n\n"
	br := bufio.NewReaderSize(strings.NewReader(in), maxHead)
	r1, err := readRequest(br)
	require.NoError(t, err)
	require.Equal(t, "/livez", r1.path)
	r2, err := readRequest(br)
	require.NoError(t, err)
	require.Equal(t, 3, r2.bodyLen)
	_, err = br.Discard(r2.bodyLen)
	require.NoError(t, err)
	r3, err := readRequest(br)
	require.NoError(t, err)
	require.Equal(t, "HEAD", r3.method)
	_, err = readRequest(br)
	require.ErrorIs(t, err, io.EOF)
}

// The fast path: a kubelet request parses with one allocation (the target
// string).
func TestReadRequestAllocs(t *testing.T) {
	r := strings.NewReader(kubeletRequest)
	br := bufio.NewReaderSize(r, maxHead)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(kubeletRequest)
		br.Reset(r)
		if _, err := readRequest(br); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 1.0)
}

func TestSplitField(t *testing.T) {
	for _, tt := range []struct {
		line, name, value string
		status            int // 0: accepted
	}{
		{line: "Host: x", name: "Host", value: "x"},
		{line: "Host:x", name: "Host", value: "x"},
		{line: "X-A: \t a b \t", name: "X-A", value: "a b"},
		{line: "X-Empty:", name: "X-Empty", value: ""},
		{line: "X-Obs: caf\xe9", name: "X-Obs", value: "caf\xe9"},
		{line: " folded", status: 400},
		{line: "\tfolded", status: 400},
		{line: "no colon", status: 400},
		{line: "Host : x", status: 400},
		{line: ": x", status: 400},
		{line: "X-A: a\rb", status: 400},
		{line: "X-A: a\x7f", status: 400},
	} {
		name, value, err := splitField([]byte(tt.line))
		if tt.status != 0 {
			require.Equal(t, tt.status, statusOf(err), "%q", tt.line)
			continue
		}
		require.NoError(t, err, "%q", tt.line)
		require.Equal(t, tt.name, string(name))
		require.Equal(t, tt.value, string(value))
	}
}
