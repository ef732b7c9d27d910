package podapi

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

// ---------------------------------------------------------------- request

func TestParseHost(t *testing.T) {
	for _, tc := range []struct {
		host                        string
		addr, serverName, authority string
		err                         string
	}{
		{host: "https://10.96.0.1:443", addr: "10.96.0.1:443", serverName: "10.96.0.1", authority: "10.96.0.1:443"},
		{host: "https://10.96.0.1:443/", addr: "10.96.0.1:443", serverName: "10.96.0.1", authority: "10.96.0.1:443"},
		{host: "HTTPS://api.example:6443", addr: "api.example:6443", serverName: "api.example", authority: "api.example:6443"},
		{host: "https://kubernetes.default.svc", addr: "kubernetes.default.svc:443", serverName: "kubernetes.default.svc", authority: "kubernetes.default.svc"},
		{host: "https://[fd00:10:96::1]:443", addr: "[fd00:10:96::1]:443", serverName: "fd00:10:96::1", authority: "[fd00:10:96::1]:443"},
		{host: "https://[::1]", addr: "[::1]:443", serverName: "::1", authority: "[::1]"},
		{host: "http://10.96.0.1:443", err: "scheme"},
		{host: "", err: "scheme"},
		{host: "https://", err: "empty host"},
		{host: "https://:443", err: "empty host"},
		{host: "https://10.96.0.1:", err: "empty port"},
		{host: "https://10.96.0.1:0", err: "port"},
		{host: "https://10.96.0.1:65536", err: "port"},
		{host: "https://10.96.0.1:+443", err: "port"},
		{host: "https://10.96.0.1:443/api", err: "port"},
		{host: "https://10.96.0.1/api", err: "not allowed"},
		{host: "https://user@10.96.0.1:443", err: "not allowed"},
		{host: "https://10.96.0.1?x=1", err: "not allowed"},
		{host: "https://fd00::1", err: "brackets"},
		{host: "https://[fd00::1", err: "no ]"},
		{host: "https://[10.0.0.1]:443", err: "IPv6"},
		{host: "https://[fd00::1]x", err: "after the IPv6"},
		{host: "https://[fd00::1%25eth0]:443", err: "IPv6"},
		{host: "https://a b:443", err: "not allowed"},
		{host: "https://host\r\nX-Injected: 1", err: "not allowed"},
	} {
		t.Run(tc.host, func(t *testing.T) {
			ep, err := parseHost(tc.host)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			want := endpoint{addr: tc.addr, serverName: tc.serverName, authority: tc.authority}
			if ip, err := netip.ParseAddrPort(tc.addr); err == nil {
				want.ip = ip // an IP host is dialled by address
			}
			require.Equal(t, want, ep)
		})
	}
}

func TestPodPath(t *testing.T) {
	p, err := podPath(Identity{Namespace: "ci", Name: "warm-1.x_y~z"})
	require.NoError(t, err)
	require.Equal(t, "/api/v1/namespaces/ci/pods/warm-1.x_y~z", p)
	p, err = podPath(Identity{Namespace: "a b/c", Name: "%?#é\r\n"})
	require.NoError(t, err)
	require.Equal(t, "/api/v1/namespaces/a%20b%2Fc/pods/%25%3F%23%C3%A9%0D%0A", p)
	for _, bad := range []Identity{{Namespace: "..", Name: "x"}, {Namespace: "ci", Name: "."}} {
		_, err := podPath(bad)
		require.ErrorContains(t, err, "not a valid namespace or pod name")
	}
}

func TestBuildRequestRefusesControlBytes(t *testing.T) {
	for _, token := range []string{"abc\r\nX-Injected: 1", "abc\ndef", "a\x00b", "a\x7fb", "\x1b[31m"} {
		_, err := buildRequest("10.96.0.1:443", "/p", token, nil)
		require.ErrorContains(t, err, "the token holds control byte")
		require.ErrorContains(t, err, "nothing sent")
		require.NotContains(t, err.Error(), token)
	}
	req, err := buildRequest("10.96.0.1:443", "/p", "a\tb", nil) // HTAB is allowed (RFC 9110 §5.5)
	require.NoError(t, err)
	require.Contains(t, string(req), "Authorization: Bearer a\tb\r\n")
}

// The request of DeleteSelf, byte for byte, as the API server receives it.
func TestDeleteSelfRequestBytes(t *testing.T) {
	const golden = "DELETE /api/v1/namespaces/ci/pods/warm-1 HTTP/1.1\r\n" +
		"Host: 10.96.0.1:443\r\n" +
		"Authorization: Bearer tok-123\r\n" +
		"Content-Type: application/json\r\n" +
		"Accept: application/json\r\n" +
		"User-Agent: warmpod\r\n" +
		"Content-Length: 138\r\n" +
		"Connection: close\r\n" +
		"\r\n" +
		`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"0b7e2c4e-1111-2222-3333-444455556666"},"propagationPolicy":"Background"}`
	var got []byte
	srv := newPipeServer(t, func(_ int, conn net.Conn) {
		got = make([]byte, len(golden))
		if _, err := io.ReadFull(conn, got); err != nil {
			t.Error(err)
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
		// Nothing follows the body: the next read sees the client's close.
		if n, _ := conn.Read(make([]byte, 1)); n != 0 {
			t.Error("bytes after the body")
		}
	})
	c := pipeConfig(t, "tok-123\n", srv.Dial)
	c.Host = "https://10.96.0.1:443"
	res, err := c.DeleteSelf(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, Deleted, res)
	require.EqualValues(t, 1, srv.dials.Load())
	srv.wg.Wait()
	require.Equal(t, golden, string(got))
	// An independent parser reads the same request.
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(golden)))
	require.NoError(t, err)
	require.Equal(t, "DELETE", r.Method)
	require.True(t, r.Close)
	require.EqualValues(t, 138, r.ContentLength)
}

func TestDeleteSelfRefusesTokenWithCRLF(t *testing.T) {
	srv := newPipeServer(t, func(int, net.Conn) { t.Error("connected") })
	var logBuf bytes.Buffer
	token := "eyJhbGciOi.secret\r\nX-Injected: 1"
	c := pipeConfig(t, token+"\n", srv.Dial)
	res, err := c.DeleteSelf(context.Background(), initlog.New(&logBuf, initlog.LevelInfo, initlog.Text, time.Now))
	require.Equal(t, Failed, res)
	require.ErrorContains(t, err, "control byte 0x0d at offset 17")
	require.ErrorContains(t, err, c.TokenFile)
	require.NotContains(t, err.Error(), "secret")
	require.NotContains(t, logBuf.String(), "secret")
	require.Zero(t, srv.dials.Load(), "nothing sent, not even a connection")
}

// ---------------------------------------------------------------- fakes

// pipeServer hands out in-memory connections as a Config.Dial; serve runs
// on the server end of each (try counts from 1) in its own goroutine, and
// the server end is closed when serve returns.
type pipeServer struct {
	serve func(try int, conn net.Conn)
	dials atomic.Int32
	wg    sync.WaitGroup
}

func newPipeServer(t *testing.T, serve func(try int, conn net.Conn)) *pipeServer {
	s := &pipeServer{serve: serve}
	t.Cleanup(s.wg.Wait)
	return s
}

func (s *pipeServer) Dial(ctx context.Context) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	client, server := net.Pipe()
	try := int(s.dials.Add(1))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer server.Close()
		s.serve(try, server)
	}()
	return client, nil
}

// pipeConfig is a Config for an injected Dial: a token file, no CA.
func pipeConfig(t *testing.T, token string, dial func(context.Context) (net.Conn, error)) Config {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte(token), 0o600))
	return Config{
		Host: "https://10.96.0.1:443", TokenFile: tokenFile, CAFile: "/nonexistent/ca.crt",
		Pod:   Identity{Name: testName, Namespace: testNS, UID: testUID},
		Dial:  dial,
		Sleep: func(context.Context, time.Duration) error { return nil },
	}
}

// readRequest reads one request of DeleteSelf off conn, as net/http parses it.
func readRequest(t *testing.T, conn net.Conn) *http.Request {
	r, err := http.ReadRequest(bufio.NewReader(conn))
	if err != nil {
		t.Errorf("reading the request: %v", err)
		return nil
	}
	if _, err := io.ReadAll(r.Body); err != nil {
		t.Errorf("reading the request body: %v", err)
	}
	return r
}

// answerWith is a pipe server that reads the request and writes raw, then
// closes; written receives how many bytes of raw the client took.
func answerWith(t *testing.T, raw []byte, written *atomic.Int64) func(int, net.Conn) {
	return func(_ int, conn net.Conn) {
		readRequest(t, conn)
		n, _ := conn.Write(raw) // net.Pipe: n is what the client read before closing
		if written != nil {
			written.Add(int64(n))
		}
	}
}

// ---------------------------------------------------------------- raw answers through DeleteSelf

func TestDeleteSelfRawAnswers(t *testing.T) {
	status := func(msg string) string {
		return `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"` + msg + `"}`
	}
	big := status(strings.Repeat("x", 40<<10))
	cases := []struct {
		name      string
		raw       string
		want      Result
		wantErr   string
		wantTries int32
		maxRead   int64 // bytes of the answer the client may take, per try; 0: all
	}{
		{
			name: "chunked body with extensions and trailers",
			raw: "HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n" +
				"10;ext=1\r\n" + status("no rbac")[:16] + "\r\n" +
				fmt.Sprintf("%x ; a=\"b c\";d\r\n", len(status("no rbac"))-16) + status("no rbac")[16:] + "\r\n" +
				"0;last\r\nX-Trailer: yes\r\nX-Other: 2\r\n\r\n",
			want: Forbidden, wantErr: "missing RBAC rule: `delete` on `pods` (apiGroup core) in namespace ci for the pod's service account: no rbac", wantTries: 1,
		},
		{
			name: "close-delimited body",
			raw:  "HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n" + status("the UID in the precondition does not match"),
			want: NotOurPod, wantErr: "does not match", wantTries: 1,
		},
		{
			name: "HTTP/1.0 answer",
			raw:  "HTTP/1.0 404 Not Found\r\n\r\n" + status("gone"),
			want: AlreadyGone, wantTries: 1,
		},
		{
			name: "body over 16 KiB is read up to 16 KiB",
			raw:  "HTTP/1.1 400 Bad Request\r\nContent-Length: " + fmt.Sprint(len(big)) + "\r\n\r\n" + big,
			want: Failed, wantErr: "unexpected status 400: {\"kind\":\"Status\"", wantTries: 1, maxRead: maxResponseRead,
		},
		{
			name: "chunked body over 16 KiB",
			raw:  "HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("400\r\n"+strings.Repeat("y", 1024)+"\r\n", 40) + "0\r\n\r\n",
			want: Failed, wantErr: "unexpected status 400: yyyy", wantTries: 1, maxRead: maxResponseRead,
		},
		{
			name: "100 Continue then 200",
			raw:  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
			want: Deleted, wantTries: 1,
		},
		{
			name: "header section over 16 KiB is an error, retried",
			raw:  "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("z", 17<<10) + "\r\n\r\n",
			want: Failed, wantErr: "header section longer than its bound", wantTries: 3, maxRead: maxResponseRead,
		},
		{
			name: "garbage status line, retried",
			raw:  "SSH-2.0-OpenSSH_9.6\r\n",
			want: Failed, wantErr: `try 3: reading the answer: malformed answer: status line "SSH-2.0-OpenSSH_9.6" is not HTTP/1.x NNN reason`, wantTries: 3,
		},
		{
			name: "connection closed without an answer, retried",
			raw:  "",
			want: Failed, wantErr: "connection closed without an answer", wantTries: 3,
		},
		{
			name: "HTTP/2 preface, retried",
			raw:  "\x00\x00\x12\x04\x00\x00\x00\x00\x00",
			want: Failed, wantErr: `answer cut short in its status line "\x00\x00\x12\x04\x00\x00\x00\x00\x00": unexpected EOF`, wantTries: 3,
		},
		{
			name: "bad Content-Length, retried",
			raw:  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
			want: Failed, wantErr: "conflicting Content-Length", wantTries: 3,
		},
		{
			name: "200 with a body cut short is still deleted",
			raw:  "HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"kind\":",
			want: Deleted, wantTries: 1,
		},
		{
			name: "500 with a malformed chunked body is retried as a 500",
			raw:  "HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
			want: Failed, wantErr: `status 500:  (answer body unreadable after 0 bytes: bad chunk size line "zz")`, wantTries: 3,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var written atomic.Int64
			srv := newPipeServer(t, answerWith(t, []byte(tc.raw), &written))
			c := pipeConfig(t, "tok", srv.Dial)
			res, err := c.DeleteSelf(context.Background(), nil)
			require.Equal(t, tc.want, res, "error: %v", err)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
			require.Equal(t, tc.wantTries, srv.dials.Load())
			srv.wg.Wait()
			if tc.maxRead > 0 {
				require.LessOrEqual(t, written.Load(), int64(tc.wantTries)*tc.maxRead)
				require.Less(t, written.Load(), int64(tc.wantTries)*int64(len(tc.raw)), "part of the answer left unread")
			}
		})
	}
}

// A server that accepts and never answers: each try ends at its deadline,
// DeleteSelf retries and gives up, and nothing hangs.
func TestDeleteSelfSilentServer(t *testing.T) {
	stall := func(_ int, conn net.Conn) {
		readRequest(t, conn)
		_, _ = io.Copy(io.Discard, conn) // until the client closes
	}
	t.Run("short deadline", func(t *testing.T) {
		srv := newPipeServer(t, stall)
		c := pipeConfig(t, "tok", srv.Dial)
		start := time.Now()
		res, err := c.deleteSelf(context.Background(), nil, 100*time.Millisecond)
		require.Equal(t, Failed, res)
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.ErrorContains(t, err, "try 3: reading the answer")
		require.EqualValues(t, 3, srv.dials.Load())
		require.Less(t, time.Since(start), 2*time.Second)
	})
	t.Run("stall inside the body of a 200", func(t *testing.T) {
		srv := newPipeServer(t, func(_ int, conn net.Conn) {
			readRequest(t, conn)
			_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"ki")
			_, _ = io.Copy(io.Discard, conn)
		})
		c := pipeConfig(t, "tok", srv.Dial)
		res, err := c.deleteSelf(context.Background(), nil, 100*time.Millisecond)
		require.NoError(t, err)
		require.Equal(t, Deleted, res, "the status line decides")
	})
	t.Run("real 5 s tries within the 10 s budget (fake clock)", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			srv := newPipeServer(t, stall)
			c := pipeConfig(t, "tok", srv.Dial)
			c.Sleep = nil // the real timer, on the bubble's clock
			start := time.Now()
			res, err := c.DeleteSelf(context.Background(), nil)
			require.Equal(t, Failed, res)
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			// Try 1 ends at 5 s, the wait is 1 s, try 2 is cut at 10 s by the
			// budget; there is no time left for a third.
			require.Equal(t, 10*time.Second, time.Since(start))
			require.EqualValues(t, 2, srv.dials.Load())
		})
	})
	t.Run("cancelled ctx stops the try at once", func(t *testing.T) {
		srv := newPipeServer(t, stall)
		c := pipeConfig(t, "tok", srv.Dial)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		res, err := c.DeleteSelf(ctx, nil)
		require.Equal(t, Failed, res)
		require.ErrorIs(t, err, context.Canceled)
		require.Less(t, time.Since(start), 2*time.Second)
	})
}

// ---------------------------------------------------------------- real TLS

// testPKI is a CA and a server certificate it signed.
type testPKI struct {
	caDER []byte
	cert  tls.Certificate
}

func newPKI(t *testing.T, dnsNames []string, ips []net.IP) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		// A Common Name that matches the IP must not help: Go ignores it.
		Subject:   pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: dnsNames, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	return testPKI{caDER: caDER, cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// tlsServer is an httptest TLS server on 127.0.0.1 with cfg, answering 200
// and counting requests and their protocol.
func tlsServer(t *testing.T, cfg *tls.Config, http2 bool) (*httptest.Server, *atomic.Int32, *atomic.Value) {
	var n atomic.Int32
	var proto atomic.Value
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		proto.Store(r.Proto)
		_, _ = io.WriteString(w, `{"kind":"Pod"}`)
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.TLS = cfg
	ts.EnableHTTP2 = http2
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, &n, &proto
}

func tlsConfig(t *testing.T, caDER []byte, host string) Config {
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(tokenFile, []byte("tok"), 0o600))
	writePEM(t, caFile, caDER)
	return Config{
		Host: host, TokenFile: tokenFile, CAFile: caFile,
		Pod:   Identity{Name: testName, Namespace: testNS, UID: testUID},
		Sleep: func(context.Context, time.Duration) error { return nil },
	}
}

func port(t *testing.T, ts *httptest.Server) string {
	_, p, err := net.SplitHostPort(ts.Listener.Addr().String())
	require.NoError(t, err)
	return p
}

// ServerName is Host's IP: the certificate's IP SANs must list it.
func TestDeleteSelfVerifiesServerName(t *testing.T) {
	byName := newPKI(t, []string{"localhost"}, nil)
	byIP := newPKI(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	cases := []struct {
		name string
		pki  testPKI
		host string // %s = port
		want Result
		err  string
	}{
		{"IP host, IP SAN", byIP, "https://127.0.0.1:%s", Deleted, ""},
		{"IP host, DNS SAN only", byName, "https://127.0.0.1:%s", Failed, "cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts, served, _ := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{tc.pki.cert}}, false)
			c := tlsConfig(t, tc.pki.caDER, fmt.Sprintf(tc.host, port(t, ts)))
			res, err := c.DeleteSelf(context.Background(), nil)
			require.Equal(t, tc.want, res, "error: %v", err)
			if tc.err == "" {
				require.NoError(t, err)
				require.EqualValues(t, 1, served.Load())
				return
			}
			require.ErrorContains(t, err, "certificate not trusted")
			require.ErrorContains(t, err, tc.err)
			require.True(t, isCertError(err))
			require.Zero(t, served.Load())
		})
	}
}

// A host name is refused before any connection: PID 1 has no resolver.
// (With an injected Config.Dial, names work: the tests above use them.)
func TestDeleteSelfRefusesAHostName(t *testing.T) {
	pki := newPKI(t, []string{"localhost"}, nil)
	ts, served, _ := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{pki.cert}}, false)
	c := tlsConfig(t, pki.caDER, "https://localhost:"+port(t, ts))
	res, err := c.DeleteSelf(context.Background(), nil)
	require.Equal(t, Failed, res)
	require.ErrorContains(t, err, `API server host "localhost" is a name`)
	require.Zero(t, served.Load())
}

func TestDeleteSelfNeverSpeaksHTTP2(t *testing.T) {
	pki := newPKI(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	ts, served, proto := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{pki.cert}}, true)
	c := tlsConfig(t, pki.caDER, "https://127.0.0.1:"+port(t, ts))
	res, err := c.DeleteSelf(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, Deleted, res)
	require.EqualValues(t, 1, served.Load())
	require.Equal(t, "HTTP/1.1", proto.Load(), "ALPN offers http/1.1 only")
}

func TestDeleteSelfRefusesTLS11(t *testing.T) {
	pki := newPKI(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	ts, served, _ := tlsServer(t, &tls.Config{Certificates: []tls.Certificate{pki.cert}, MaxVersion: tls.VersionTLS11}, false)
	c := tlsConfig(t, pki.caDER, "https://127.0.0.1:"+port(t, ts))
	res, err := c.DeleteSelf(context.Background(), nil)
	require.Equal(t, Failed, res)
	require.ErrorContains(t, err, "protocol version")
	require.Zero(t, served.Load())
}

// A TCP server that accepts and never starts the TLS handshake.
func TestDeleteSelfSilentTLSServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	pki := newPKI(t, nil, []net.IP{net.ParseIP("127.0.0.1")})
	c := tlsConfig(t, pki.caDER, "https://"+l.Addr().String())
	start := time.Now()
	res, err := c.deleteSelf(context.Background(), nil, 150*time.Millisecond)
	require.Equal(t, Failed, res)
	require.ErrorContains(t, err, "try 3")
	require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded), "%v", err)
	require.Less(t, time.Since(start), 3*time.Second)
	mu.Lock()
	require.Len(t, conns, 3)
	mu.Unlock()
}

// ---------------------------------------------------------------- response parser

// countingReader counts the bytes taken from r.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// endless is an answer that never ends: head, then fill forever.
type endless struct {
	head []byte
	fill byte
}

func (e *endless) Read(p []byte) (int, error) {
	n := copy(p, e.head)
	e.head = e.head[n:]
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	return len(p), nil
}

func TestReadResponse(t *testing.T) {
	atLimit := func(extra int) string {
		head := "HTTP/1.1 200 OK\r\nX: \r\n\r\n"
		return "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("p", maxHeaderBytes-len(head)+extra) + "\r\n\r\n"
	}
	bigChunked := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("3e8\r\n"+strings.Repeat("c", 1000)+"\r\n", 20) + "0\r\n\r\n"
	cases := []struct {
		name       string
		in         string
		code       int
		body       string // compared when bodyLen is 0
		bodyLen    int
		retryAfter string
		err        string
		bodyErr    string
	}{
		{name: "content-length", in: "HTTP/1.1 403 Forbidden\r\nContent-Length: 5\r\n\r\nhelloEXTRA", code: 403, body: "hello"},
		{name: "content-length zero", in: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", code: 200},
		{name: "repeated identical content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\ncontent-length: 2, 2\r\n\r\nokNO", code: 200, body: "ok"},
		{name: "no reason phrase", in: "HTTP/1.1 202\r\nContent-Length: 2\r\n\r\nok", code: 202, body: "ok"},
		{name: "bare LF line ends", in: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", code: 200, body: "ok"},
		{
			name: "chunked with extensions and trailers",
			in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"5;name=val;q=\"x y\"\r\nhello\r\n6 ; ext\r\n world\r\n00A\r\n0123456789\r\n0;last=1\r\nX-Trailer: 1\r\nOther: 2\r\n\r\nIGNORED",
			code: 200, body: "hello world0123456789",
		},
		{name: "chunked overrides content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", code: 200, body: "ok"},
		{name: "chunked, case-insensitive and last", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\ntransfer-encoding:  CHUNKED \r\n\r\n2\r\nok\r\n0\r\n\r\n", code: 200, body: "ok"},
		{name: "chunked not last: to the close", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\nok\r\n0\r\n\r\n", code: 200, body: "2\r\nok\r\n0\r\n\r\n"},
		{name: "HTTP/1.0 with chunked: to the close", in: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", code: 200, body: "2\r\nok\r\n0\r\n\r\n"},
		{name: "close-delimited", in: "HTTP/1.1 500 Oops\r\nContent-Type: text/plain\r\n\r\nall of it\n", code: 500, body: "all of it\n"},
		{name: "204 has no body", in: "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello", code: 204},
		{name: "304 has no body", in: "HTTP/1.1 304 Not Modified\r\n\r\nhello", code: 304},
		{name: "100 Continue and 103 Early Hints skipped", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", code: 200, body: "ok"},
		{name: "retry-after kept", in: "HTTP/1.1 429 Too Many Requests\r\nretry-after:  2 \r\nContent-Length: 0\r\n\r\n", code: 429, retryAfter: "2"},
		{name: "obs-fold joined with SP", in: "HTTP/1.1 503 X\r\nX-Long: a\r\n b\r\nRetry-After:\r\n\t7\r\nContent-Length: 0\r\n\r\n", code: 503, retryAfter: " 7"},
		{name: "content-length body over 16 KiB", in: "HTTP/1.1 400 X\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("b", 100000), code: 400, bodyLen: maxBodyToRead},
		{name: "chunked body over 16 KiB", in: bigChunked, code: 200, bodyLen: maxBodyToRead},
		{name: "close-delimited body over 16 KiB", in: "HTTP/1.1 400 X\r\n\r\n" + strings.Repeat("b", 100000), code: 400, bodyLen: maxBodyToRead},
		{name: "headers exactly at the bound", in: atLimit(0), code: 200},
		{name: "headers one byte over the bound", in: atLimit(1), err: "malformed answer: header section longer than its bound"},
		{name: "one huge header", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("h", 1<<20) + "\r\n\r\n", err: "header section longer than its bound"},
		{name: "endless 100 Continue", in: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 2000), err: "header section longer than its bound"},
		{name: "empty", in: "", err: "connection closed without an answer"},
		{name: "EOF in the status line", in: "HTTP/1.1 200", err: "unexpected EOF"},
		{name: "EOF in the headers", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", err: "answer cut short in its header section: unexpected EOF"},
		{name: "garbage", in: "garbage\r\n\r\n", err: `status line "garbage"`},
		{name: "HTTP/2 version", in: "HTTP/2 200 OK\r\n\r\n", err: "status line"},
		{name: "lower-case version", in: "http/1.1 200 OK\r\n\r\n", err: "status line"},
		{name: "four-digit code", in: "HTTP/1.1 2000 OK\r\n\r\n", err: "status line"},
		{name: "two-digit code", in: "HTTP/1.1 20 OK\r\n\r\n", err: "status line"},
		{name: "two spaces", in: "HTTP/1.1  200 OK\r\n\r\n", err: "status line"},
		{name: "code under 100", in: "HTTP/1.1 099 X\r\n\r\n", err: "status code 99"},
		{name: "code over 599", in: "HTTP/1.1 600 X\r\n\r\n", err: "status code 600 out of 100..599"},
		{name: "101 unasked", in: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", err: "101"},
		{name: "TLS alert bytes", in: "\x15\x03\x03\x00\x02\x02\x28", err: `answer cut short in its status line "\x15\x03\x03\x00\x02\x02(": unexpected EOF`},
		{name: "EOF after 100 Continue", in: "HTTP/1.1 100 Continue\r\n\r\n", err: "answer cut short after an interim 1xx answer"},
		{name: "long garbage is quoted short", in: strings.Repeat("G", 1000) + "\r\n", err: `"GGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGGG"...`},
		{name: "space before colon", in: "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", err: "bad header field line"},
		{name: "no colon", in: "HTTP/1.1 200 OK\r\nnocolon\r\n\r\n", err: "bad header field line"},
		{name: "empty field name", in: "HTTP/1.1 200 OK\r\n: x\r\n\r\n", err: "bad header field line"},
		{name: "fold before any field", in: "HTTP/1.1 200 OK\r\n X: y\r\n\r\n", err: "whitespace before the first header field"},
		{name: "bare CR", in: "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", err: "bare CR"},
		{name: "NUL in a value", in: "HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", err: "NUL"},
		{name: "conflicting content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", err: "conflicting Content-Length"},
		{name: "negative content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: "bad Content-Length"},
		{name: "signed content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", err: "bad Content-Length"},
		{name: "empty content-length", in: "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\nok", err: "bad Content-Length"},
		{name: "overflowing content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok", err: "bad Content-Length"},
		{name: "body cut short", in: "HTTP/1.1 500 X\r\nContent-Length: 10\r\n\r\nabc", code: 500, body: "abc", bodyErr: "body ended after 3 of 10 bytes"},
		{name: "bad chunk size", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", code: 500, bodyErr: `bad chunk size line "zz"`},
		{name: "chunk size then junk", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n5 x\r\nhello\r\n0\r\n\r\n", code: 500, bodyErr: "bad chunk size line"},
		{name: "no CRLF after chunk data", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n", code: 500, body: "hello", bodyErr: "no CRLF after chunk data"},
		{name: "huge chunk size", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\nx", code: 500, bodyErr: "too large"},
		{name: "largest chunk size read up to the bound", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n00fffffffffffffff\r\n" + strings.Repeat("d", 20000), code: 500, bodyLen: maxBodyToRead},
		{name: "chunk data cut short", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nabc", code: 500, body: "abc", bodyErr: "chunked body cut short: unexpected EOF"},
		{name: "chunked without last chunk", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", code: 500, body: "abc", bodyErr: "chunked body cut short: unexpected EOF"},
		{name: "chunked without trailer end", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n", code: 500, body: "abc", bodyErr: "chunked body cut short: unexpected EOF"},
		{name: "chunk data ends at a chunk boundary", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n", code: 500, bodyErr: "chunked body cut short: unexpected EOF"},
		{name: "bad trailer", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nnot a field\r\n\r\n", code: 500, body: "abc", bodyErr: "bad trailer field line"},
		{name: "chunk framing over its bound", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3;" + strings.Repeat("e", 5000) + "\r\nabc\r\n0\r\n\r\n", code: 500, bodyErr: "chunk framing longer than its bound"},
		{name: "endless trailers", in: "HTTP/1.1 500 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n" + strings.Repeat("T: t\r\n", 10000), code: 500, body: "abc", bodyErr: "chunk framing longer than its bound"},
	}
	for _, tc := range cases {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/oneByte=%v", tc.name, oneByte), func(t *testing.T) {
				var src io.Reader = strings.NewReader(tc.in)
				if oneByte {
					src = iotest.OneByteReader(src)
				}
				cr := &countingReader{r: src}
				a, err := readResponse(cr)
				require.LessOrEqual(t, cr.n, maxResponseRead)
				if tc.err != "" {
					require.ErrorContains(t, err, tc.err)
					return
				}
				require.NoError(t, err)
				require.Equal(t, tc.code, a.code)
				require.Equal(t, tc.retryAfter, a.retryAfter)
				if tc.bodyLen > 0 {
					require.Len(t, a.body, tc.bodyLen)
				} else {
					require.Equal(t, tc.body, string(a.body))
				}
				if tc.bodyErr == "" {
					require.NoError(t, a.bodyErr)
				} else {
					require.ErrorContains(t, a.bodyErr, tc.bodyErr)
				}
			})
		}
	}
}

// Answers that never end take at most maxResponseRead bytes.
func TestReadResponseEndless(t *testing.T) {
	for _, tc := range []struct {
		name, head string
		fill       byte
		err        string
	}{
		{name: "close-delimited body", head: "HTTP/1.1 200 OK\r\n\r\n", fill: 'b'},
		{name: "huge content-length", head: "HTTP/1.1 200 OK\r\nContent-Length: 999999999999\r\n\r\n", fill: 'b'},
		{name: "status line", head: "HTTP/1.1 200 ", fill: 'r', err: "longer than its bound"},
		{name: "header value", head: "HTTP/1.1 200 OK\r\nX: ", fill: 'v', err: "longer than its bound"},
		{name: "blank lines as obs-fold", head: "HTTP/1.1 200 OK\r\nX: v\r\n", fill: ' ', err: "longer than its bound"},
		{name: "chunk extension", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;", fill: 'x'},
		{name: "chunk data", head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffff\r\n", fill: 'x'},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: &endless{head: []byte(tc.head), fill: tc.fill}}
			a, err := readResponse(cr)
			require.LessOrEqual(t, cr.n, maxResponseRead)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.LessOrEqual(t, len(a.body), maxBodyToRead)
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"2", 2 * time.Second},
		{" 2\t", 2 * time.Second},
		{"0", 0},
		{"-1", 0},
		{"+1", 0},
		{"1.5", 0},
		{"1 2", 0},
		{"99999999999999999999", 999999999 * time.Second},
		{"Sun, 01 Mar 2026 12:00:30 GMT", 30 * time.Second},
		{"Sunday, 01-Mar-26 12:00:30 GMT", 30 * time.Second},
		{"Sun Mar  1 12:00:30 2026", 30 * time.Second},
		{"Sun, 01 Mar 2026 11:00:00 GMT", 0},
		{"Sun, 01 Mar 2026 12:00:30 PST", 0},
		{"soon", 0},
	} {
		require.Equal(t, tc.want, parseRetryAfter(tc.v, now), "%q", tc.v)
	}
}

// ---------------------------------------------------------------- fuzzing

// FuzzReadResponse feeds arbitrary bytes as the server's answer: the parser
// must not panic, must not take more than maxResponseRead bytes, must keep
// at most maxBodyToRead bytes of body, and must end (the input is finite).
// Where net/http also reads the bytes as an HTTP/1.1 final answer, status
// code and body must agree.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"kind\":\"Pod\"}",
		"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.0 500 Internal Server Error\r\n\r\nclose-delimited",
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 503 X\r\nRetry-After: Sun, 01 Mar 2026 12:00:30 GMT\r\nX: a\r\n b\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\nTransfer-Encoding: gzip, chunked\n\n3\nabc\n0\n\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"garbage",
		"",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, oneByte bool) {
		var src io.Reader = bytes.NewReader(data)
		if oneByte {
			src = iotest.OneByteReader(src)
		}
		cr := &countingReader{r: src}
		a, err := readResponse(cr)
		if cr.n > maxResponseRead {
			t.Fatalf("took %d bytes, bound %d", cr.n, maxResponseRead)
		}
		if err != nil {
			return
		}
		if a.code < 200 || a.code > 599 {
			t.Fatalf("final status %d", a.code)
		}
		if len(a.body) > maxBodyToRead {
			t.Fatalf("kept %d bytes of body", len(a.body))
		}
		// The same bytes through net/http, when it takes them as a final
		// HTTP/1.1 answer and reads its body without error. net/http is more
		// lenient in places (no header bound, obsolete forms) and stricter in
		// others, so only answers both accept are compared.
		resp, herr := http.ReadResponse(bufio.NewReader(bytes.NewReader(data)), &http.Request{Method: "DELETE"})
		if herr != nil || resp.StatusCode < 200 || resp.ProtoMinor != 1 {
			return
		}
		if resp.StatusCode != a.code {
			t.Fatalf("status %d, net/http %d", a.code, resp.StatusCode)
		}
		hbody, herr := io.ReadAll(io.LimitReader(resp.Body, maxBodyToRead))
		if herr != nil || a.bodyErr != nil {
			return
		}
		if !bytes.Equal(hbody, a.body) {
			t.Fatalf("body %q, net/http %q", a.body, hbody)
		}
	})
}

func TestBodyFraming(t *testing.T) {
	for _, tc := range []struct {
		name       string
		minor      int
		code       int
		cl, te     []string
		wantKind   bodyKind
		wantLength int64
		wantErr    string
	}{
		{name: "204 ignores Content-Length", minor: 1, code: 204, cl: []string{"5"}, wantKind: bodyNone},
		{name: "304", minor: 1, code: 304, te: []string{"chunked"}, wantKind: bodyNone},
		{name: "1xx", minor: 1, code: 100, wantKind: bodyNone},
		{name: "chunked", minor: 1, code: 200, te: []string{"gzip", "chunked"}, wantKind: bodyChunked},
		{name: "chunked overrides Content-Length", minor: 1, code: 200, cl: []string{"5"}, te: []string{"chunked"}, wantKind: bodyChunked},
		{name: "chunked not final", minor: 1, code: 200, te: []string{"chunked, gzip"}, wantKind: bodyToClose},
		{name: "Transfer-Encoding in HTTP/1.0", minor: 0, code: 200, te: []string{"chunked"}, wantKind: bodyToClose},
		{name: "Content-Length", minor: 1, code: 403, cl: []string{"12", "12"}, wantKind: bodyLength, wantLength: 12},
		{name: "conflicting Content-Length", minor: 1, code: 200, cl: []string{"1", "2"}, wantErr: "conflicting Content-Length"},
		{name: "bad Content-Length", minor: 1, code: 200, cl: []string{"-1"}, wantErr: "bad Content-Length"},
		{name: "no framing", minor: 1, code: 500, wantKind: bodyToClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, length, err := bodyFraming(tc.minor, tc.code, tc.cl, tc.te)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, errMalformed)
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantKind, kind)
			require.Equal(t, tc.wantLength, length)
		})
	}
}
