// Package probe serves warmpod's liveness and readiness endpoints for the
// kubelet, following the kube-apiserver health conventions
// (https://kubernetes.io/docs/reference/using-api/health-checks/): /livez,
// /readyz, /healthz (an alias of /livez), single checks under
// /livez/<name> and /readyz/<name>, ?verbose and ?exclude=<name>. The
// kubelet counts any status in 200–399 as success, so this server never
// redirects; failures are 503.
package probe

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
)

// Check is one named health check. Fn must be cheap and must not block on
// locks held by slow paths: it runs on every probe.
type Check struct {
	Name string
	Fn   func() error
}

// Handler answers probe requests. Build it with NewHandler.
type Handler struct {
	live, ready []Check
	status      func() []byte
	log         *slog.Logger
}

// NewHandler returns a handler with the given liveness and readiness
// checks; status returns the JSON document served at /status (nil
// disables it).
func NewHandler(live, ready []Check, status func() []byte, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{live: live, ready: ready, status: status, log: log}
}

// maxBody bounds every probe response body (bytes).
const maxBody = 1 << 10

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	path := r.URL.Path
	if path == "/status" && h.status != nil {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(h.status())
		return
	}
	kind, single, ok := splitPath(path)
	if !ok {
		http.NotFound(w, r)
		return
	}
	checks := h.live
	if kind == "readyz" {
		checks = h.ready
	}
	if single != "" {
		var found *Check
		for i := range checks {
			if checks[i].Name == single {
				found = &checks[i]
			}
		}
		if found == nil {
			http.NotFound(w, r)
			return
		}
		checks = []Check{*found}
	}
	code, body := Evaluate(kind, checks, r.URL.Query().Has("verbose"), r.URL.Query()["exclude"], h.log)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

func splitPath(p string) (kind, single string, ok bool) {
	p = strings.TrimPrefix(p, "/")
	kind, single, _ = strings.Cut(p, "/")
	switch kind {
	case "healthz":
		kind = "livez"
	case "livez", "readyz":
	default:
		return "", "", false
	}
	if strings.Contains(single, "/") {
		return "", "", false
	}
	return kind, single, true
}

// Evaluate runs checks and renders the kube-apiserver style body: "ok"
// when all pass and verbose is false; otherwise one line per check
// ("[+]name ok" or "[-]name failed: reason withheld"), a "warn:" line per
// excluded name that matches no check, and a last line "<kind> check
// passed|failed". It returns 200 or 503. Failure reasons go to log, never
// to the body. The body is at most 1 KiB.
func Evaluate(kind string, checks []Check, verbose bool, exclude []string, log *slog.Logger) (int, []byte) {
	excluded := make(map[string]bool, len(exclude))
	for _, e := range exclude {
		for _, n := range strings.Split(e, ",") {
			if n = strings.TrimSpace(n); n != "" {
				excluded[n] = true
			}
		}
	}
	var b strings.Builder
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			b.WriteString("[+]" + c.Name + " excluded: ok\n")
			delete(excluded, c.Name)
			continue
		}
		if err := c.Fn(); err != nil {
			failed = true
			b.WriteString("[-]" + c.Name + " failed: reason withheld\n")
			if log != nil {
				log.Debug("probe check failed", "probe", kind, "check", c.Name, "reason", err.Error())
			}
			continue
		}
		b.WriteString("[+]" + c.Name + " ok\n")
	}
	for n := range excluded {
		b.WriteString("warn: some health checks cannot be excluded: no matches for \"" + truncate(n, 64) + "\"\n")
	}
	code := http.StatusOK
	verdict := kind + " check passed\n"
	if failed {
		code = http.StatusServiceUnavailable
		verdict = kind + " check failed\n"
	}
	if !failed && !verbose {
		return code, []byte("ok")
	}
	out := b.String()
	if len(out)+len(verdict) > maxBody {
		out = out[:maxBody-len(verdict)]
	}
	return code, []byte(out + verdict)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ServeListener serves h on ln until ctx is done (bind it to ":9898", every
// address: the kubelet probes the pod IP, so 127.0.0.1 alone would fail
// every probe). Timeouts keep a slow or hostile client from holding a
// connection: ReadHeaderTimeout 2s, WriteTimeout 5s, 4 KiB of headers.
// After ctx is done it returns nil.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      5 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    4 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	errCh := make(chan error, 1)
	go func() { errCh <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return nil
	case err := <-errCh:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}
