package probe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/warmpod/warmpod/internal/initlog"
)

// fuzzSeeds are the parser table's inputs, the shapes of keep-alive and
// pipelined sequences, and a few near misses.
func fuzzSeeds() []string {
	var seeds []string
	for _, c := range parseCases() {
		seeds = append(seeds, c.in)
	}
	get := "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
	return append(seeds,
		get+get+get,
		get+"HEAD /readyz?verbose HTTP/1.1\r\nHost: x\r\n\r\n"+kubeletRequest+get,
		"POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"+get,
		"POST /livez HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n",
		get+"GET /livez HTTP/1.0\r\n\r\n"+get,
		get+"GET /livez HTTP/1.1\r\nHost: x\r\nbad\r\n\r\n"+get,
		"GET /status HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz/state HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /livez?exclude=reaper&exclude=a,b&verbose HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET http://h:1/healthz/ping?verbose=1 HTTP/1.1\r\nHost: h:1\r\n\r\n",
		"GET /livez HTTP/1.1\r\nHost: x\r\n",
		"\n\nGET / HTTP/1.1\nHost:\n\n",
	)
}

// knownStatus reports whether code is one the server has a reason phrase
// for, that is, one it means to send.
func knownStatus(code int) bool { return statusText(code) != "Unknown" }

// FuzzParseRequest reads requests one after another from arbitrary bytes,
// as a keep-alive connection would. It must not panic; what it accepts
// must be a well-formed request by its own fields, and one that net/http's
// http.ReadRequest (a different parser) also reads the same way; what it
// refuses must carry a status the server knows.
func FuzzParseRequest(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), maxHead)
		gr := bufio.NewReader(bytes.NewReader(data))
		compare := true
		for i := 0; i < 64; i++ {
			if compare {
				// net/http does not skip empty lines before a
				// request; stop comparing from there on.
				if b, err := gr.Peek(1); err == nil && (b[0] == '\r' || b[0] == '\n') {
					compare = false
				}
			}
			req, err := readRequest(br)
			if err != nil {
				var re *requestError
				switch {
				case errors.As(err, &re):
					if !knownStatus(re.status) || re.status < 400 || re.reason == "" || bytes.ContainsAny([]byte(re.reason), "\r\n") {
						t.Fatalf("refusal %d %q", re.status, re.reason)
					}
				case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				default:
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			checkRequest(t, req)
			if compare {
				compareWithNetHTTP(t, gr, req)
			}
			if _, err := br.Discard(req.bodyLen); err != nil {
				return
			}
		}
	})
}

// checkRequest checks the fields of an accepted request against each other
// and the grammar.
func checkRequest(t *testing.T, req request) {
	t.Helper()
	if !isToken([]byte(req.method)) || req.target == "" || req.minor < 0 || req.minor > 9 {
		t.Fatalf("accepted %+v", req)
	}
	for _, c := range []byte(req.target) {
		if c <= ' ' || c == 0x7f {
			t.Fatalf("control byte in target %q", req.target)
		}
	}
	if req.bodyLen < 0 || req.bodyLen > maxDiscard {
		t.Fatalf("body length %d", req.bodyLen)
	}
	if req.minor == 0 && !req.close {
		t.Fatal("HTTP/1.0 kept alive")
	}
	if req.expect && (req.bodyLen == 0 || req.minor == 0) {
		t.Fatalf("expect without a body or in 1.0: %+v", req)
	}
	switch {
	case req.target[0] == '/':
		if req.path == "" || req.path[0] != '/' {
			t.Fatalf("origin-form %q gave path %q", req.target, req.path)
		}
	case req.target == "*":
		if req.path != "*" {
			t.Fatalf("asterisk-form gave path %q", req.path)
		}
	case req.method == "CONNECT":
	default:
		if req.path == "" || req.path[0] != '/' {
			t.Fatalf("absolute-form %q gave path %q", req.target, req.path)
		}
	}
}

// compareWithNetHTTP reads the same request with http.ReadRequest from gr,
// which is at the same offset, and compares: method, target, version,
// Connection: close, Content-Length, and for origin-form the decoded path
// and the query. Only what this parser accepts is compared: it refuses
// more than net/http (obs-fold, Transfer-Encoding, no Host, conflicting
// fields), on purpose. Authorities, in absolute-form and CONNECT's
// authority-form, are not checked by this parser (it ignores them; CONNECT
// is 405 whatever its target), so net/http may refuse those.
func compareWithNetHTTP(t *testing.T, gr *bufio.Reader, req request) {
	t.Helper()
	g, err := http.ReadRequest(gr)
	if err != nil {
		if req.target[0] != '/' && req.target != "*" {
			t.Skip("authority refused by net/http")
		}
		t.Fatalf("accepted %+v, net/http refuses: %v", req, err)
	}
	defer g.Body.Close()
	if g.Method != req.method || g.RequestURI != req.target || g.ProtoMajor != 1 || g.ProtoMinor != req.minor {
		t.Fatalf("accepted %+v, net/http read %s %q %s", req, g.Method, g.RequestURI, g.Proto)
	}
	if req.minor >= 1 && g.Close != req.close {
		t.Fatalf("close: ours %v, net/http %v", req.close, g.Close)
	}
	if g.ContentLength != int64(req.bodyLen) {
		t.Fatalf("Content-Length: ours %d, net/http %d", req.bodyLen, g.ContentLength)
	}
	if req.target[0] == '/' && (g.URL.Path != req.path || g.URL.RawQuery != req.rawQuery) {
		t.Fatalf("path/query: ours %q %q, net/http %q %q", req.path, req.rawQuery, g.URL.Path, g.URL.RawQuery)
	}
	// The body may be cut short by the end of the input; both
	// readers then stop.
	_, _ = io.Copy(io.Discard, g.Body)
}

// memConn is a connection whose client sent in and then closed its side;
// what the server writes is kept in out. Deadlines are ignored: the input
// ends, so the server cannot wait for ever.
type memConn struct {
	in  *bytes.Reader
	out bytes.Buffer
}

func (c *memConn) Read(p []byte) (int, error)         { return c.in.Read(p) }
func (c *memConn) Write(p []byte) (int, error)        { return c.out.Write(p) }
func (c *memConn) Close() error                       { return nil }
func (c *memConn) LocalAddr() net.Addr                { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9898} }
func (c *memConn) RemoteAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000} }
func (c *memConn) SetDeadline(t time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { return nil }

// FuzzServeConn runs the whole connection handler on arbitrary bytes. It
// must not panic and must end; every answer it writes must be a
// well-formed HTTP/1.1 response (read back with net/http's
// http.ReadResponse) with the status it reported, the headers every answer
// carries, a Content-Length that matches the body (no body for HEAD),
// Connection: close on the last answer only if the server closed, and
// nothing after the last answer.
func FuzzServeConn(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	ready := []Check{{Name: "state", Fn: func() error { return errors.New("busy") }}, {Name: "shell", Fn: func() error { return nil }}}
	h := NewHandler(checks("reaper"), ready, func() []byte { return []byte(`{"state":"busy"}`) }, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		type sent struct {
			method string
			status int
		}
		var answers []sent
		s := newServer(h, initlog.Discard())
		s.onAnswer = func(method string, status int) { answers = append(answers, sent{method, status}) }
		c := &memConn{in: bytes.NewReader(data)}
		s.handle(c)
		out := bufio.NewReader(bytes.NewReader(c.out.Bytes()))
		for i, a := range answers {
			if !knownStatus(a.status) {
				t.Fatalf("answer %d: status %d", i, a.status)
			}
			method := a.method
			if method == "" {
				method = "GET"
			}
			resp, err := http.ReadResponse(out, &http.Request{Method: method})
			if err != nil {
				t.Fatalf("answer %d (%s %d) is not a response: %v\n%q", i, a.method, a.status, err, c.out.Bytes())
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("answer %d: body: %v", i, err)
			}
			cl, err := strconv.Atoi(resp.Header.Get("Content-Length"))
			switch {
			case resp.Proto != "HTTP/1.1" || resp.StatusCode != a.status:
				t.Fatalf("answer %d: %s %d, want HTTP/1.1 %d", i, resp.Proto, resp.StatusCode, a.status)
			case err != nil || method != "HEAD" && cl != len(body) || method == "HEAD" && len(body) != 0:
				t.Fatalf("answer %d: Content-Length %q, body %d bytes", i, resp.Header.Get("Content-Length"), len(body))
			case resp.Header.Get("Content-Type") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store":
				t.Fatalf("answer %d: headers %v", i, resp.Header)
			case (a.status == 405) != (resp.Header.Get("Allow") == "GET, HEAD"):
				t.Fatalf("answer %d: status %d, Allow %q", i, a.status, resp.Header.Get("Allow"))
			case resp.Close && i != len(answers)-1:
				t.Fatalf("answer %d of %d has Connection: close", i, len(answers))
			case a.status >= 400 && a.status != 404 && a.status != 405 && a.status != 503 && !resp.Close:
				t.Fatalf("answer %d: refusal %d without Connection: close", i, a.status)
			}
		}
		if rest, _ := io.ReadAll(out); len(rest) > 0 {
			t.Fatalf("%d bytes after the last of %d answers: %q", len(rest), len(answers), rest)
		}
	})
}
