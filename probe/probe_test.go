package probe

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func checks(failing ...string) []Check {
	bad := map[string]bool{}
	for _, f := range failing {
		bad[f] = true
	}
	var out []Check
	for _, n := range []string{"ping", "supervisor", "reaper"} {
		out = append(out, Check{Name: n, Fn: func() error {
			if bad[n] {
				return errors.New("secret-reason-" + n)
			}
			return nil
		}})
	}
	return out
}

// The kube-apiserver health body conventions, as the kubelet and humans
// read them.
func TestBodies(t *testing.T) {
	tests := []struct {
		name     string
		live     []Check
		target   string
		method   string
		wantCode int
		wantBody string
	}{
		{"healthy", checks(), "/livez", "GET", 200, "ok"},
		{"healthz alias", checks(), "/healthz", "GET", 200, "ok"},
		{"verbose", checks(), "/livez?verbose", "GET", 200, "[+]ping ok\n[+]supervisor ok\n[+]reaper ok\nlivez check passed\n"},
		{"failure is verbose, reason withheld", checks("reaper"), "/livez", "GET", 503, "[+]ping ok\n[+]supervisor ok\n[-]reaper failed: reason withheld\nlivez check failed\n"},
		{"exclude the failing check", checks("reaper"), "/livez?exclude=reaper", "GET", 200, "ok"},
		{"exclude unknown warns", checks(), "/livez?verbose&exclude=nope", "GET", 200, "[+]ping ok\n[+]supervisor ok\n[+]reaper ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n"},
		{"single check", checks("reaper"), "/livez/ping", "GET", 200, "ok"},
		{"single failing check", checks("reaper"), "/livez/reaper", "GET", 503, "[-]reaper failed: reason withheld\nlivez check failed\n"},
		{"unknown single check", checks(), "/livez/nope", "GET", 404, "404 page not found\n"},
		{"unknown path", checks(), "/metrics", "GET", 404, "404 page not found\n"},
		{"root", checks(), "/", "GET", 404, "404 page not found\n"},
		{"HEAD has no body", checks(), "/livez", "HEAD", 200, ""},
		{"POST refused", checks(), "/livez", "POST", 405, "method not allowed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(tt.live, nil, nil, slog.New(slog.DiscardHandler))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
			require.Equal(t, tt.wantCode, rec.Code)
			require.Equal(t, tt.wantBody, rec.Body.String())
			require.NotContains(t, rec.Body.String(), "secret-reason")
			require.Less(t, rec.Body.Len(), 1024)
			if tt.wantCode < 400 || tt.wantCode == 503 {
				require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestReadyzUsesReadinessChecks(t *testing.T) {
	ready := []Check{{Name: "state", Fn: func() error { return errors.New("busy") }}}
	h := NewHandler(checks(), ready, func() []byte { return []byte(`{"state":"busy"}`) }, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	require.Equal(t, 503, rec.Code)
	require.Equal(t, "[-]state failed: reason withheld\nreadyz check failed\n", rec.Body.String())
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	require.Equal(t, 200, rec.Code)
	require.JSONEq(t, `{"state":"busy"}`, rec.Body.String())
}

func TestBodyIsBounded(t *testing.T) {
	var many []Check
	for i := 0; i < 200; i++ {
		many = append(many, Check{Name: "a-rather-long-check-name", Fn: func() error { return errors.New("x") }})
	}
	code, body := Evaluate("livez", many, true, nil, nil)
	require.Equal(t, 503, code)
	require.LessOrEqual(t, len(body), 1024)
	require.Contains(t, string(body), "livez check failed\n")
}

func TestServeListenerOnLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- ServeListener(ctx, ln, NewHandler(checks(), nil, nil, nil), slog.New(slog.DiscardHandler))
	}()
	c := http.Client{Timeout: 2 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("http://" + ln.Addr().String() + "/livez")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, "ok", string(b))
	cancel()
	require.NoError(t, <-done)
}
