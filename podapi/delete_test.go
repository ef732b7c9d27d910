package podapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/internal/initlog"
)

const (
	testNS   = "ci"
	testName = "warm-1"
	testUID  = "0b7e2c4e-1111-2222-3333-444455556666"
)

// A bound service-account token is a JWT; DeleteSelf reads its "sub" claim to
// name the service account in the 403 log. Signature is irrelevant here.
func fakeJWT(sub, nonce string) string {
	enc := base64.RawURLEncoding.EncodeToString
	payload, _ := json.Marshal(map[string]string{"sub": sub, "jti": nonce})
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + "." + enc([]byte("sig-"+nonce))
}

var (
	firstToken   = fakeJWT("system:serviceaccount:ci:warmpod", "first")
	rotatedToken = fakeJWT("system:serviceaccount:ci:warmpod", "rotated")
)

type reply struct {
	code       int
	retryAfter string
	body       string
}

type seenRequest struct {
	method, path, auth, contentType, accept string
	proto, userAgent, host                  string
	close                                   bool
	body                                    map[string]any
}

// apiServer is a scripted HTTPS stand-in for the kube-apiserver on 127.0.0.1:
// DeleteSelf reaches it through the production Dial (TCP, TLS verified
// against the server's certificate written as the CA file).
type apiServer struct {
	*httptest.Server
	t         *testing.T
	tokenFile string

	mu      sync.Mutex
	script  []reply
	seen    []seenRequest
	rotated bool
}

func newAPIServer(t *testing.T, tokenFile string, script ...reply) *apiServer {
	s := &apiServer{t: t, tokenFile: tokenFile, script: script}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // TLS handshake failures of the wrong-CA case
	ts.StartTLS()
	t.Cleanup(ts.Close)
	s.Server = ts
	return s
}

func (s *apiServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		body = map[string]any{"unparseable": string(raw)}
	}
	s.mu.Lock()
	s.seen = append(s.seen, seenRequest{
		method: r.Method, path: r.URL.EscapedPath(), auth: r.Header.Get("Authorization"),
		contentType: r.Header.Get("Content-Type"), accept: r.Header.Get("Accept"), body: body,
		proto: r.Proto, userAgent: r.Header.Get("User-Agent"), host: r.Host, close: r.Close,
	})
	if len(s.script) == 0 {
		s.mu.Unlock()
		s.t.Errorf("unexpected request %d", len(s.seen))
		w.WriteHeader(http.StatusTeapot)
		return
	}
	rep := s.script[0]
	s.script = s.script[1:]
	if rep.code == http.StatusUnauthorized && !s.rotated {
		// The kubelet rotated the projected token: the next try must read it again.
		s.rotated = true
		if err := os.WriteFile(s.tokenFile, []byte(rotatedToken+"\n"), 0o600); err != nil {
			s.t.Error(err)
		}
	}
	s.mu.Unlock()
	if rep.retryAfter != "" {
		w.Header().Set("Retry-After", rep.retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.code)
	body2 := rep.body
	if body2 == "" {
		body2 = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"answer ` + strconv.Itoa(rep.code) + `","code":` + strconv.Itoa(rep.code) + `}`
	}
	_, _ = io.WriteString(w, body2)
}

func (s *apiServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func writePEM(t *testing.T, path string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
}

// otherCA is a self-signed CA that did not sign the test server's certificate.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42), Subject: pkix.Name{CommonName: "not the cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return der
}

func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestDeleteSelf(t *testing.T) {
	wantBody := map[string]any{
		"kind": "DeleteOptions", "apiVersion": "v1",
		"preconditions":     map[string]any{"uid": testUID},
		"propagationPolicy": "Background",
	}
	status := func(code int, reason, msg string) string {
		b, _ := json.Marshal(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": msg, "code": code})
		return string(b)
	}
	cases := []struct {
		name       string
		script     []reply
		refused    bool // talk to a closed port instead of the server
		wrongCA    bool // trust a CA that did not sign the server
		want       Result
		wantErr    string // "" = nil error
		wantTries  int    // requests the server saw
		wantSleeps []time.Duration
		wantTokens []string // Authorization tokens, per request
		wantLog    []string // substrings of the captured log
	}{
		{name: "200 deleted", script: []reply{{code: 200, body: `{"kind":"Pod"}`}}, want: Deleted, wantTries: 1},
		{name: "202 accepted", script: []reply{{code: 202, body: `{"kind":"Pod"}`}}, want: Deleted, wantTries: 1},
		{name: "404 already gone", script: []reply{{code: 404, body: status(404, "NotFound", `pods "warm-1" not found`)}}, want: AlreadyGone, wantTries: 1},
		{
			name: "409 uid precondition failed",
			// The message of a real v1.34 API server (e2e/kube TestKubePackageInPod).
			script: []reply{{code: 409, body: status(409, "Conflict", `Operation cannot be fulfilled on Pod "warm-1": the UID in the precondition (`+testUID+`) does not match the UID in record (other). The object might have been deleted and then recreated`)}},
			want:   NotOurPod, wantErr: "does not match the UID in record (other)", wantTries: 1,
		},
		{
			name:   "401 then 200 re-reads the rotated token",
			script: []reply{{code: 401}, {code: 200}}, want: Deleted, wantTries: 2,
			wantTokens: []string{firstToken, rotatedToken},
		},
		{
			name:   "401 twice fails",
			script: []reply{{code: 401}, {code: 401}}, want: Failed, wantErr: "token rejected twice", wantTries: 2,
			wantTokens: []string{firstToken, rotatedToken},
		},
		{
			name: "403 names the missing rule",
			script: []reply{{code: 403, body: status(403, "Forbidden",
				`pods "warm-1" is forbidden: User "system:serviceaccount:ci:warmpod" cannot delete resource "pods" in API group "" in the namespace "ci"`)}},
			want: Forbidden, wantErr: "missing RBAC rule", wantTries: 1,
			wantLog: []string{"level=ERROR", "missing RBAC rule: `delete` on `pods` (apiGroup core) in namespace ci for service account warmpod (system:serviceaccount:ci:warmpod)", "cannot delete resource"},
		},
		{
			name:   "500 three times fails after exactly 3 tries",
			script: []reply{{code: 500}, {code: 500}, {code: 500}}, want: Failed, wantErr: "status 500", wantTries: 3,
			wantSleeps: []time.Duration{time.Second, 3 * time.Second},
		},
		{
			name:   "503 then 200",
			script: []reply{{code: 503}, {code: 200}}, want: Deleted, wantTries: 2,
			wantSleeps: []time.Duration{time.Second},
		},
		{
			name:   "429 honours Retry-After",
			script: []reply{{code: 429, retryAfter: "2"}, {code: 200}}, want: Deleted, wantTries: 2,
			wantSleeps: []time.Duration{2 * time.Second},
		},
		{
			name:   "429 Retry-After beyond the budget gives up at once",
			script: []reply{{code: 429, retryAfter: "60"}}, want: Failed, wantErr: "budget", wantTries: 1,
		},
		{
			name:   "400 is not retried",
			script: []reply{{code: 400, body: status(400, "BadRequest", "bad body")}}, want: Failed, wantErr: "bad body", wantTries: 1,
		},
		{
			name: "connection refused, 3 tries", refused: true, want: Failed, wantErr: "connection refused",
			wantSleeps: []time.Duration{time.Second, 3 * time.Second},
		},
		{
			name: "server certificate from another CA is refused", wrongCA: true, script: []reply{{code: 200}},
			want: Failed, wantErr: "certificate", wantTries: 0,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
			require.NoError(t, os.WriteFile(tokenFile, []byte(firstToken+"\n"), 0o600))
			srv := newAPIServer(t, tokenFile, tc.script...)
			if tc.wrongCA {
				writePEM(t, caFile, otherCA(t))
			} else {
				writePEM(t, caFile, srv.Certificate().Raw)
			}
			host := srv.URL
			if tc.refused {
				host = "https://" + refusedAddr(t)
			}
			var sleeps []time.Duration
			var logBuf bytes.Buffer
			logger := initlog.New(&logBuf, initlog.LevelDebug, initlog.Text, time.Now)
			c := Config{
				Host: host, TokenFile: tokenFile, CAFile: caFile,
				Pod:   Identity{Name: testName, Namespace: testNS, UID: testUID},
				Sleep: func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil },
			}
			start := time.Now()
			got, err := c.DeleteSelf(context.Background(), logger)
			require.Less(t, time.Since(start), 5*time.Second, "injected Sleep: nothing may really wait")
			require.Equal(t, tc.want, got)
			if tc.wantErr == "" {
				require.NoError(t, err)
			} else {
				require.ErrorContains(t, err, tc.wantErr)
			}
			require.Equal(t, tc.wantSleeps, sleeps)

			reqs := srv.requests()
			if !tc.refused {
				require.Len(t, reqs, tc.wantTries)
			}
			for i, r := range reqs {
				require.Equal(t, http.MethodDelete, r.method)
				require.Equal(t, "/api/v1/namespaces/ci/pods/warm-1", r.path)
				require.Equal(t, "application/json", r.contentType)
				require.Equal(t, "application/json", r.accept)
				require.Equal(t, "HTTP/1.1", r.proto)
				require.Equal(t, "warmpod", r.userAgent)
				require.Equal(t, strings.TrimPrefix(host, "https://"), r.host)
				require.True(t, r.close, "Connection: close")
				require.Equal(t, wantBody, r.body, "exact DeleteOptions, never gracePeriodSeconds")
				want := firstToken
				if tc.wantTokens != nil {
					want = tc.wantTokens[i]
				}
				require.Equal(t, "Bearer "+want, r.auth)
			}
			logs := logBuf.String()
			for _, w := range tc.wantLog {
				require.Contains(t, logs, w)
			}
			if got != Forbidden {
				// Only the 403 remedy is worth an error line of its own.
				require.NotContains(t, logs, "level=ERROR", "failures are returned for the caller to log, not logged")
			}
			require.NotContains(t, logs, firstToken, "the token is never logged")
			require.NotContains(t, logs, rotatedToken)
			if err != nil {
				require.NotContains(t, err.Error(), firstToken)
			}
		})
	}
}

func TestDeleteSelfStopsWhenContextEnds(t *testing.T) {
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(tokenFile, []byte("t"), 0o600))
	srv := newAPIServer(t, tokenFile, reply{code: 503}, reply{code: 503}, reply{code: 503})
	writePEM(t, caFile, srv.Certificate().Raw)
	ctx, cancel := context.WithCancel(context.Background())
	c := Config{Host: srv.URL, TokenFile: tokenFile, CAFile: caFile, Pod: Identity{testName, testNS, testUID},
		Sleep: func(ctx context.Context, d time.Duration) error { cancel(); return ctx.Err() }}
	got, err := c.DeleteSelf(ctx, nil)
	require.Equal(t, Failed, got)
	require.ErrorIs(t, err, context.Canceled)
	require.Len(t, srv.requests(), 1)
}

func TestDeleteSelfRealSleepBackoff(t *testing.T) {
	if testing.Short() {
		t.Skip("sleeps 1 s")
	}
	dir := t.TempDir()
	tokenFile, caFile := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(tokenFile, []byte("t"), 0o600))
	srv := newAPIServer(t, tokenFile, reply{code: 503}, reply{code: 202})
	writePEM(t, caFile, srv.Certificate().Raw)
	c := Config{Host: srv.URL, TokenFile: tokenFile, CAFile: caFile, Pod: Identity{testName, testNS, testUID}}
	start := time.Now()
	got, err := c.DeleteSelf(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, Deleted, got)
	require.InDelta(t, time.Second.Seconds(), time.Since(start).Seconds(), 0.9)
}

func TestDeleteSelfRefusesIncompleteConfig(t *testing.T) {
	for _, c := range []Config{
		{Host: "https://127.0.0.1:1", Pod: Identity{Name: "a", Namespace: "b"}},
		{Host: "http://127.0.0.1:1", Pod: Identity{"a", "b", "c"}},
		{Host: "", Pod: Identity{"a", "b", "c"}},
		{Host: "https://127.0.0.1:1", CAFile: "/nonexistent/ca.crt", Pod: Identity{"a", "b", "c"}},
	} {
		got, err := c.DeleteSelf(context.Background(), nil)
		require.Equal(t, Failed, got)
		require.Error(t, err)
	}
}

func TestServiceAccountOf(t *testing.T) {
	require.Equal(t, "service account warmpod (system:serviceaccount:ci:warmpod)", serviceAccountOf(firstToken))
	require.Equal(t, "the pod's service account", serviceAccountOf("opaque-token"))
	require.Equal(t, "the pod's service account", serviceAccountOf(fakeJWT("alice", "x")))
}

func TestAnswerStatus(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    answer
		want status
	}{
		{"Status message", answer{code: 409, body: []byte(`{"kind":"Status","message":"conflict"}`)}, status{409, "conflict"}},
		{"body start when not a Status", answer{code: 500, body: []byte("  oops \n")}, status{500, "oops"}},
		{"empty body", answer{code: 200}, status{200, ""}},
		{
			"unreadable body", answer{code: 503, body: []byte("part"), bodyErr: io.ErrUnexpectedEOF},
			status{503, "part (answer body unreadable after 4 bytes: unexpected EOF)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, answerStatus(tc.a))
		})
	}
}
