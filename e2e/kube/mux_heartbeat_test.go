//go:build kube

package kubee2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// idleProxy is a TCP proxy on 127.0.0.1 in front of the API server that
// closes a connection once no data has crossed it for idle, as a load
// balancer's idle timeout or the container runtime's stream_idle_timeout
// does. It ends TLS on both sides (the driver's kubeconfig points at it
// and trusts its certificate; it trusts the API server's CA), so that it
// reads the WebSocket frames of an exec stream: every byte crosses it, but
// WebSocket control frames (client-go's pings every 5 s and their pongs)
// do not count as activity, since a hop behind the API server never sees
// them (Kubernetes 1.30+ translates WebSocket exec to SPDY there). What
// keeps an exec stream through it is data in the stream.
type idleProxy struct {
	addr string
	idle time.Duration

	mu      sync.Mutex
	streams []*wsStream
	conns   []net.Conn
}

// wsStream is one upgraded (WebSocket) connection through the proxy: when
// each data frame crossed it, per direction (0: client → API server, 1:
// back), how many control frames crossed, and whether the proxy cut it
// for idleness.
type wsStream struct {
	mu sync.Mutex
	wsRecord
}

// wsRecord is what a wsStream records.
type wsRecord struct {
	opened   time.Time
	closed   time.Time
	data     [2][]time.Time
	controls [2]int
	cut      bool
}

// newIdleProxy starts a proxy to the API server of kubeconfig (a file, as
// saKubeconfig writes it) and points the kubeconfig at it.
func newIdleProxy(t *testing.T, kubeconfig string, idle time.Duration) *idleProxy {
	t.Helper()
	b, err := os.ReadFile(kubeconfig)
	require.NoError(t, err)
	var kc map[string]any
	require.NoError(t, json.Unmarshal(b, &kc))
	cl := kc["clusters"].([]any)[0].(map[string]any)["cluster"].(map[string]any)
	u, err := url.Parse(cl["server"].(string))
	require.NoError(t, err)
	ca, err := base64.StdEncoding.DecodeString(cl["certificate-authority-data"].(string))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca))
	tlsCfg := &tls.Config{RootCAs: roots, ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}

	// The driver's side is TLS too, with a certificate of the test's own
	// (client-go sends a token only over TLS); HTTP/1.1 only, so that
	// the proxy reads plain HTTP and WebSocket frames in between.
	cert, certPEM := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})
	require.NoError(t, err)
	p := &idleProxy{addr: ln.Addr().String(), idle: idle}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, u.Host, tlsCfg)
		}
	}()
	cl["server"] = "https://" + p.addr
	cl["certificate-authority-data"] = base64.StdEncoding.EncodeToString(certPEM)
	b, _ = json.Marshal(kc)
	require.NoError(t, os.WriteFile(kubeconfig, b, 0o600))
	return p
}

// serve carries one connection: the HTTP heads as they are, then either
// raw bytes (each counts) or, after a WebSocket upgrade, frame by frame
// (data frames count, control frames cross without counting).
func (p *idleProxy) serve(c net.Conn, target string, tlsCfg *tls.Config) {
	u, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", target, tlsCfg)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, c, u)
	p.mu.Unlock()
	var last atomic.Int64
	touch := func() { last.Store(time.Now().UnixNano()) }
	touch()
	ws := &wsStream{wsRecord: wsRecord{opened: time.Now()}}
	var upgraded atomic.Bool
	done := make(chan struct{})
	closeBoth := func() { c.Close(); u.Close() }
	pipe := func(dst net.Conn, src net.Conn, dir int) {
		defer closeBoth()
		br := bufio.NewReader(src)
		head, err := readHead(br)
		if err != nil {
			return
		}
		if _, err := dst.Write([]byte(head)); err != nil {
			return
		}
		touch()
		lower := strings.ToLower(head)
		if dir == 0 && strings.Contains(lower, "\r\nupgrade: websocket") ||
			dir == 1 && strings.HasPrefix(head, "HTTP/1.1 101") && strings.Contains(lower, "\r\nupgrade: websocket") {
			if dir == 1 {
				upgraded.Store(true)
				p.mu.Lock()
				p.streams = append(p.streams, ws)
				p.mu.Unlock()
			}
			_ = wsFrames(dst, br, func(control bool) {
				ws.mu.Lock()
				defer ws.mu.Unlock()
				if control {
					ws.controls[dir]++
					return
				}
				ws.data[dir] = append(ws.data[dir], time.Now())
				touch()
			})
			return
		}
		_, _ = io.Copy(dst, touchReader{br, touch})
	}
	go pipe(u, c, 0)
	go func() { pipe(c, u, 1); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			ws.mu.Lock()
			ws.closed = time.Now()
			ws.mu.Unlock()
			return
		case <-tick.C:
			if time.Since(time.Unix(0, last.Load())) >= p.idle {
				ws.mu.Lock()
				ws.cut = upgraded.Load()
				ws.mu.Unlock()
				closeBoth()
			}
		}
	}
}

// touchReader counts every byte read as activity.
type touchReader struct {
	r     io.Reader
	touch func()
}

func (t touchReader) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 {
		t.touch()
	}
	return n, err
}

// readHead reads an HTTP request or response head, through its empty line.
func readHead(br *bufio.Reader) (string, error) {
	var b strings.Builder
	for {
		l, err := br.ReadString('\n')
		b.WriteString(l)
		if err != nil {
			return "", err
		}
		if l == "\r\n" {
			return b.String(), nil
		}
	}
}

// wsFrames copies WebSocket frames (RFC 6455 §5.2) from br to dst, calling
// seen for each with whether it is a control frame (opcode 8 and above).
func wsFrames(dst io.Writer, br *bufio.Reader, seen func(control bool)) error {
	for {
		hdr := make([]byte, 2, 14)
		if _, err := io.ReadFull(br, hdr); err != nil {
			return err
		}
		n := uint64(hdr[1] & 0x7f)
		ext := 0
		switch n {
		case 126:
			ext = 2
		case 127:
			ext = 8
		}
		if hdr[1]&0x80 != 0 {
			ext += 4 // the mask
		}
		hdr = hdr[:2+ext]
		if _, err := io.ReadFull(br, hdr[2:]); err != nil {
			return err
		}
		switch hdr[1] & 0x7f {
		case 126:
			n = uint64(binary.BigEndian.Uint16(hdr[2:4]))
		case 127:
			n = binary.BigEndian.Uint64(hdr[2:10])
		}
		if _, err := dst.Write(hdr); err != nil {
			return err
		}
		seen(hdr[0]&0x0f >= 8)
		if _, err := io.CopyN(dst, br, int64(n)); err != nil {
			return err
		}
	}
}

// snapshot returns the upgraded connections so far, copied.
func (p *idleProxy) snapshot() []wsRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []wsRecord
	for _, s := range p.streams {
		s.mu.Lock()
		closed := s.closed
		if closed.IsZero() {
			closed = time.Now() // still open
		}
		out = append(out, wsRecord{opened: s.opened, closed: closed, data: [2][]time.Time{
			append([]time.Time(nil), s.data[0]...), append([]time.Time(nil), s.data[1]...)}, controls: s.controls, cut: s.cut})
		s.mu.Unlock()
	}
	return out
}

// maxGap is the longest time without a data frame in one direction of s,
// from its first frame to its last.
func maxGap(ts []time.Time) time.Duration {
	var g time.Duration
	for i := 1; i < len(ts); i++ {
		g = max(g, ts[i].Sub(ts[i-1]))
	}
	return g
}

// A build stage silent for 30 s, behind a proxy that closes a connection
// after 20 s without data (WebSocket pings do not count): the job's
// stream into its pod lives through it, because the multiplexer's
// heartbeat is data that attach in the pod answers. Without it the proxy
// cuts the stream and the stage is reattached.
func TestGitLabMuxHeartbeatKeepsASilentStage(t *testing.T) {
	const idle = 20 * time.Second
	p := newPool(t, poolOpts{replicas: 1})
	proxy := newIdleProxy(t, p.kubeconfig, idle)
	state := filepath.Join(p.dir, "state")
	t.Cleanup(func() { killMux(t, state) })

	r := p.runJob(t, jobOpts{id: 811, script: []string{`echo BEFORE-SILENCE`, `sleep 30`, `echo AFTER-SILENCE`}})
	require.Equal(t, 0, r.exit, r.String())
	tr := traceText(r.trace)
	assert.Contains(t, tr, "AFTER-SILENCE")
	assert.NotContains(t, tr, "reattaching", "the stream was never cut")
	assert.NotContains(t, tr, "direct exec")
	for _, tm := range p.timings(t, 811) {
		if tm.Call == "run" {
			assert.Zero(t, tm.DirectCalls, "%s: no direct exec", tm.Stage)
		}
	}

	streams := proxy.snapshot()
	require.NotEmpty(t, streams, "the driver's exec streams went through the proxy")
	// The multiplexer's stream is the longest one: it carried the job.
	var mux wsRecord
	for _, s := range streams {
		assert.False(t, s.cut, "no exec stream was idle for %s", idle)
		if s.closed.Sub(s.opened) > mux.closed.Sub(mux.opened) {
			mux = s
		}
	}
	life := mux.closed.Sub(mux.opened)
	require.Greater(t, life, 30*time.Second, "one stream lived through the silent stage")
	for dir, name := range []string{"to the pod", "from the pod"} {
		g := maxGap(mux.data[dir])
		t.Logf("stream of %s: %d data frames %s, longest gap %s; %d control frames", life.Round(time.Second), len(mux.data[dir]), name, g.Round(time.Millisecond), mux.controls[dir])
		assert.Less(t, g, idle, "data crossed %s at least every %s (the heartbeat and its answer)", name, idle)
	}
}

// selfSigned is a certificate for 127.0.0.1, its own CA, and its PEM.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "idle-proxy"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
