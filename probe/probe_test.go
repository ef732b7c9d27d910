package probe

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Every test stops what it started: the servers' accept loops and
// connections, and net/http's idle client connections.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
// read them, through the real server and net/http's client.
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
		{"verbose with a value", checks(), "/livez?verbose=1", "GET", 200, "[+]ping ok\n[+]supervisor ok\n[+]reaper ok\nlivez check passed\n"},
		{"failure is verbose, reason withheld", checks("reaper"), "/livez", "GET", 503, "[+]ping ok\n[+]supervisor ok\n[-]reaper failed: reason withheld\nlivez check failed\n"},
		{"exclude the failing check", checks("reaper"), "/livez?exclude=reaper", "GET", 200, "ok"},
		{"exclude, verbose", checks("reaper"), "/livez?exclude=reaper&verbose", "GET", 200, "[+]ping ok\n[+]supervisor ok\n[+]reaper excluded: ok\nlivez check passed\n"},
		{"exclude a comma list and repeated", checks("reaper", "ping"), "/livez?exclude=reaper,%20supervisor&exclude=ping&verbose", "GET", 200, "[+]ping excluded: ok\n[+]supervisor excluded: ok\n[+]reaper excluded: ok\nlivez check passed\n"},
		{"exclude unknown warns", checks(), "/livez?verbose&exclude=nope", "GET", 200, "[+]ping ok\n[+]supervisor ok\n[+]reaper ok\nwarn: some health checks cannot be excluded: no matches for \"nope\"\nlivez check passed\n"},
		{"exclude unknown, not verbose", checks(), "/livez?exclude=nope", "GET", 200, "ok"},
		{"single check", checks("reaper"), "/livez/ping", "GET", 200, "ok"},
		{"single failing check", checks("reaper"), "/livez/reaper", "GET", 503, "[-]reaper failed: reason withheld\nlivez check failed\n"},
		{"single check, escaped slash", checks("reaper"), "/livez%2Freaper", "GET", 503, "[-]reaper failed: reason withheld\nlivez check failed\n"},
		{"unknown single check", checks(), "/livez/nope", "GET", 404, "404 page not found\n"},
		{"trailing slash is the list, no redirect", checks(), "/livez/", "GET", 200, "ok"},
		{"double slash", checks(), "//livez", "GET", 404, "404 page not found\n"},
		{"deeper path", checks(), "/livez/ping/x", "GET", 404, "404 page not found\n"},
		{"escaped path", checks(), "/%6Civez", "GET", 200, "ok"},
		{"unknown path", checks(), "/metrics", "GET", 404, "404 page not found\n"},
		{"root", checks(), "/", "GET", 404, "404 page not found\n"},
		{"HEAD has no body", checks(), "/livez", "HEAD", 200, ""},
		{"POST refused", checks(), "/livez", "POST", 405, "method not allowed\n"},
		{"PUT to an unknown path refused", checks(), "/nope", "PUT", 405, "method not allowed\n"},
		{"status disabled", checks(), "/status", "GET", 404, "404 page not found\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startServer(t, NewHandler(tt.live, nil, nil, nil), nil)
			c := newClient(t)
			req, err := http.NewRequest(tt.method, "http://"+addr+tt.target, nil)
			require.NoError(t, err)
			resp, err := c.Do(req)
			require.NoError(t, err)
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tt.wantCode, resp.StatusCode)
			require.Equal(t, tt.wantBody, string(b))
			require.NotContains(t, string(b), "secret-reason")
			require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
			if tt.method == "HEAD" {
				require.Equal(t, int64(len("ok")), resp.ContentLength, "HEAD has the GET's Content-Length")
			} else {
				require.Equal(t, int64(len(b)), resp.ContentLength)
			}
			if tt.wantCode == 405 {
				require.Equal(t, "GET, HEAD", resp.Header.Get("Allow"))
			}
		})
	}
}

func TestReadyzUsesReadinessChecks(t *testing.T) {
	ready := []Check{{Name: "state", Fn: func() error { return errors.New("busy") }}}
	addr := startServer(t, NewHandler(checks(), ready, func() []byte { return []byte(`{"state":"busy"}`) }, nil), nil)
	c := newClient(t)
	resp, err := c.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 503, resp.StatusCode)
	require.Equal(t, "[-]state failed: reason withheld\nreadyz check failed\n", string(b))

	resp, err = c.Get("http://" + addr + "/status")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"state":"busy"}`, string(b))
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))

	req, _ := http.NewRequest("HEAD", "http://"+addr+"/status", nil)
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.Equal(t, int64(len(`{"state":"busy"}`)), resp.ContentLength)
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

// An excluded check does not run; a second check of an excluded name does
// (one exclusion per name, as before the rewrite).
func TestExcludedCheckDoesNotRun(t *testing.T) {
	ran := map[string]int{}
	mk := func(n string) Check { return Check{Name: n, Fn: func() error { ran[n]++; return nil }} }
	code, body := Evaluate("livez", []Check{mk("a"), mk("b"), mk("b")}, true, []string{"b"}, nil)
	require.Equal(t, 200, code)
	require.Equal(t, "[+]a ok\n[+]b excluded: ok\n[+]b ok\nlivez check passed\n", string(body))
	require.Equal(t, map[string]int{"a": 1, "b": 1}, ran)
}

// The common answer allocates nothing in the handler: checks run, "ok"
// comes back.
func TestAnswerOKDoesNotAllocate(t *testing.T) {
	h := NewHandler(checks(), nil, nil, nil)
	allocs := testing.AllocsPerRun(100, func() {
		if a := h.answer("GET", "/livez", ""); a.status != 200 {
			t.Fatal(a.status)
		}
	})
	require.Zero(t, allocs)
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		q       string
		verbose bool
		exclude []string
	}{
		{"", false, nil},
		{"verbose", true, nil},
		{"verbose=0", true, nil}, // presence is what counts, as in kube-apiserver
		{"verbose;x", false, nil},
		{"exclude=a;b&verbose", true, nil},
		{"exclude=%zz&verbose", true, nil},
		{"%zz=1&verbose", true, nil},
		{"verbose=%zz", false, nil},
		{"exclude=a+b&exclude=c%2Cd&exclude=", false, []string{"a b", "c,d", ""}},
		{"&&exclude=x&", false, []string{"x"}},
		{"Verbose", false, nil},
		{"ver%62ose", true, nil},
	}
	for _, tt := range tests {
		v, ex := parseQuery(tt.q)
		require.Equal(t, tt.verbose, v, tt.q)
		require.Equal(t, tt.exclude, ex, tt.q)
	}
}

func TestUnescape(t *testing.T) {
	tests := []struct {
		in, path, query string
		ok              bool
	}{
		{"/livez", "/livez", "/livez", true},
		{"a%20b+c", "a b+c", "a b c", true},
		{"%2f%2F", "//", "//", true},
		{"%", "", "", false},
		{"%2", "", "", false},
		{"%g0", "", "", false},
		{"%00", "\x00", "\x00", true},
		{"100%", "", "", false},
	}
	for _, tt := range tests {
		p, ok := unescape(tt.in, false)
		require.Equal(t, tt.ok, ok, tt.in)
		require.Equal(t, tt.path, p, tt.in)
		q, ok := unescape(tt.in, true)
		require.Equal(t, tt.ok, ok, tt.in)
		require.Equal(t, tt.query, q, tt.in)
	}
}

// A short body for error messages in tests.
func short(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return strings.ReplaceAll(s, "\r\n", "⏎")
}
