package probe

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/warmpod/warmpod/internal/initlog"
)

// benchHandler has the checks warmpod's main registers, all passing.
func benchHandler() *Handler {
	ok := func() error { return nil }
	live := []Check{{Name: "ping", Fn: ok}, {Name: "supervisor", Fn: ok}, {Name: "reaper", Fn: ok}, {Name: "control-socket", Fn: ok}}
	ready := []Check{{Name: "state", Fn: ok}, {Name: "shell", Fn: ok}}
	return NewHandler(live, ready, func() []byte { return []byte(`{"state":"idle"}`) }, nil)
}

// benchServer serves benchHandler on 127.0.0.1 until the benchmark ends
// and returns its address.
func benchServer(b *testing.B) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeListener(ctx, ln, benchHandler(), initlog.Discard()) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	})
	return ln.Addr().String()
}

// readResponse reads one response to a GET from br by hand (status line,
// headers up to the empty line, Content-Length bytes of body), so that the
// benchmarks below measure the server rather than a client library, and
// returns the status code.
func readResponse(br *bufio.Reader) (int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 {
		return 0, io.ErrUnexpectedEOF
	}
	code, _ := strconv.Atoi(string(line[9:12]))
	n := 0
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			break
		}
		if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
			n, _ = strconv.Atoi(string(bytes.TrimRight(v, "\r\n")))
		}
	}
	_, err = br.Discard(n)
	return code, err
}

// kubeletGET is what the kubelet's prober sends (it disables keep-alive,
// hence Connection: close).
const kubeletGET = "GET /readyz HTTP/1.1\r\nHost: 10.0.0.7:9898\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\nConnection: close\r\n\r\n"

// BenchmarkRoundTripKeepAlive is one GET /readyz on an open keep-alive
// connection: write the request, read the whole response.
func BenchmarkRoundTripKeepAlive(b *testing.B) {
	addr := benchServer(b)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /readyz HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: Go-http-client/1.1\r\nAccept-Encoding: gzip\r\n\r\n")
	br := bufio.NewReader(c)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if code, err := readResponse(br); err != nil || code != 200 {
			b.Fatalf("code %d, %v", code, err)
		}
	}
}

// BenchmarkRoundTripNewConn is one kubelet-style probe: connect, GET
// /readyz with Connection: close, read to EOF, close.
func BenchmarkRoundTripNewConn(b *testing.B) {
	addr := benchServer(b)
	req := []byte(kubeletGET)
	b.ReportAllocs()
	for b.Loop() {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReaderSize(c, 512)
		if code, err := readResponse(br); err != nil || code != 200 {
			b.Fatalf("code %d, %v", code, err)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			b.Fatalf("connection not closed after Connection: close: %v", err)
		}
		c.Close()
	}
}

// BenchmarkHTTPClientKeepAlive is the e2e stress load's shape: net/http's
// client over keep-alive (client costs included).
func BenchmarkHTTPClientKeepAlive(b *testing.B) {
	url := "http://" + benchServer(b) + "/readyz"
	c := &http.Client{}
	defer c.CloseIdleConnections()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
}

// benchServe is the server's work for one request without the network:
// parse the head, route and run the checks, write the answer into the
// connection's output buffer. (Before the rewrite these benchmarks ran
// net/http's ServeHTTP into an httptest recorder, which left out parsing
// and serializing.)
func benchServe(b *testing.B, target string) {
	s := newServer(benchHandler(), nil)
	in := "GET " + target + " HTTP/1.1\r\nHost: 10.0.0.7:9898\r\nUser-Agent: kube-probe/1.33\r\nAccept: */*\r\n\r\n"
	r := strings.NewReader(in)
	br := bufio.NewReaderSize(r, maxHead)
	c := &conn{s: s, out: make([]byte, 0, 512)}
	b.ReportAllocs()
	for b.Loop() {
		r.Reset(in)
		br.Reset(r)
		req, err := readRequest(br)
		if err != nil {
			b.Fatal(err)
		}
		a := s.h.answer(req.method, req.path, req.rawQuery)
		if a.status != 200 {
			b.Fatalf("%s: %d", target, a.status)
		}
		c.out = c.out[:0]
		s.queue(c, req.method, a, req.close)
	}
}

func BenchmarkServeLivez(b *testing.B)         { benchServe(b, "/livez") }
func BenchmarkServeReadyz(b *testing.B)        { benchServe(b, "/readyz") }
func BenchmarkServeReadyzVerbose(b *testing.B) { benchServe(b, "/readyz?verbose") }
