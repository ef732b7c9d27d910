// Package probe serves warmpod's liveness and readiness endpoints for the
// kubelet, following the kube-apiserver health conventions
// (https://kubernetes.io/docs/reference/using-api/health-checks/): /livez,
// /readyz, /healthz (an alias of /livez), single checks under
// /livez/<name> and /readyz/<name>, ?verbose and ?exclude=<name>, and a
// JSON document at /status. The kubelet counts any status in 200–399 as
// success, so this server never redirects; failures are 503.
//
// The server is a small HTTP/1.1 server of its own on package net rather
// than net/http, which weighs about 1.5 MB in PID 1's static binary for
// the two GETs it answers. It implements the part of RFC 9112 (HTTP/1.1 message
// syntax) that a prober uses: GET and HEAD, origin-form and absolute-form
// targets, keep-alive and pipelining, Connection: close, HTTP/1.0. A
// request body is read and discarded when it is small and has a
// Content-Length; anything else a prober never sends (chunked bodies,
// HTTP/2, obs-fold, oversized or malformed heads) is answered with a 4xx
// or 5xx and the connection is closed. Every connection is bounded in
// time and memory, and their number is capped (see ServeListener).
package probe

import (
	"maps"
	"slices"
	"strings"

	"github.com/warmpod/warmpod/internal/initlog"
)

// Check is one named health check. Fn must be cheap and must not block on
// locks held by slow paths: it runs on every probe, on the connection's
// goroutine, with no lock of this package held.
type Check struct {
	Name string
	Fn   func() error
}

// Handler answers probe requests. Build it with NewHandler; serve it with
// ServeListener. It holds no lock and no mutable state: any number of
// connections use it at once.
type Handler struct {
	live, ready []Check
	status      func() []byte
	log         *initlog.Logger
}

// NewHandler returns a handler with the given liveness and readiness
// checks; status returns the JSON document served at /status (nil
// disables it: /status is then 404). A nil log discards.
func NewHandler(live, ready []Check, status func() []byte, log *initlog.Logger) *Handler {
	if log == nil {
		log = initlog.Discard()
	}
	return &Handler{live: live, ready: ready, status: status, log: log}
}

// maxBody bounds every probe response body built by Evaluate (bytes).
const maxBody = 1 << 10

// Status codes this package sends (RFC 9110 §15).
const (
	statusOK                  = 200
	statusBadRequest          = 400
	statusNotFound            = 404
	statusMethodNotAllowed    = 405
	statusContentTooLarge     = 413
	statusURITooLong          = 414
	statusExpectationFailed   = 417
	statusHeaderTooLarge      = 431
	statusNotImplemented      = 501
	statusServiceUnavailable  = 503
	statusVersionNotSupported = 505
)

// Content types of the answers.
const (
	textPlain = "text/plain; charset=utf-8"
	appJSON   = "application/json"
)

// answer is one response before it is written: what the handler decided,
// independent of the connection (keep-alive, HEAD) that carries it.
type answer struct {
	status      int
	contentType string
	body        string
	allow       bool // 405: send Allow: GET, HEAD (RFC 9110 §15.5.6)
}

// The bodies of 404 and 405 are the ones net/http's http.NotFound and
// http.Error write, so that a check written against any Go HTTP server
// matches them.
var (
	notFound         = answer{status: statusNotFound, contentType: textPlain, body: "404 page not found\n"}
	methodNotAllowed = answer{status: statusMethodNotAllowed, contentType: textPlain, body: "method not allowed\n", allow: true}
)

// answer routes one parsed request: method, the percent-decoded path and
// the raw query (without '?').
func (h *Handler) answer(method, path, rawQuery string) answer {
	if method != "GET" && method != "HEAD" {
		return methodNotAllowed
	}
	if path == "/status" && h.status != nil {
		return answer{status: statusOK, contentType: appJSON, body: string(h.status())}
	}
	kind, single, ok := splitPath(path)
	if !ok {
		return notFound
	}
	checks := h.live
	if kind == "readyz" {
		checks = h.ready
	}
	if single != "" {
		var found []Check
		for i := range checks {
			if checks[i].Name == single {
				// The last one of that name wins, as before.
				found = checks[i : i+1]
			}
		}
		if found == nil {
			return notFound
		}
		checks = found
	}
	verbose, exclude := parseQuery(rawQuery)
	code, body := evaluate(kind, checks, verbose, exclude, h.log)
	return answer{status: code, contentType: textPlain, body: body}
}

// splitPath maps a decoded path to the check list it names: "livez" (also
// for /healthz) or "readyz", and a single check name or "". A trailing
// slash ("/livez/") means the whole list; deeper paths are not found.
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

// parseQuery reads the two parameters the kube-apiserver conventions
// define from a raw query: whether "verbose" is present (with any value)
// and every value of "exclude", decoded. Like net/url's Query, which this
// replaces, a pair with a malformed escape or a ';' is skipped rather than
// failing the request.
func parseQuery(q string) (verbose bool, exclude []string) {
	for q != "" {
		var pair string
		pair, q, _ = strings.Cut(q, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, ok := unescape(k, true)
		if !ok {
			continue
		}
		switch key {
		case "verbose":
			if _, ok := unescape(v, true); ok {
				verbose = true
			}
		case "exclude":
			if val, ok := unescape(v, true); ok {
				exclude = append(exclude, val)
			}
		}
	}
	return verbose, exclude
}

// unescape decodes %XX escapes (RFC 3986 §2.1), and '+' as a space when
// query is true (the form encoding of query strings). It reports false on
// a '%' not followed by two hex digits. It allocates only when s has an
// escape.
func unescape(s string, query bool) (string, bool) {
	n := 0
	plus := false
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '%':
			if i+2 >= len(s) || !ishex(s[i+1]) || !ishex(s[i+2]) {
				return "", false
			}
			n++
			i += 2
		case '+':
			plus = query
		}
	}
	if n == 0 && !plus {
		return s, true
	}
	b := make([]byte, 0, len(s)-2*n)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		case c == '+' && query:
			b = append(b, ' ')
		default:
			b = append(b, c)
		}
	}
	return string(b), true
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// Evaluate runs checks and renders the kube-apiserver style body: "ok"
// when all pass and verbose is false; otherwise one line per check
// ("[+]name ok" or "[-]name failed: reason withheld"), a "warn:" line per
// excluded name that matches no check, and a last line "<kind> check
// passed|failed". Each exclude entry may be a comma-separated list; an
// excluded check is not run. It returns 200 or 503 (the kubelet counts
// 200–399 as success). Failure reasons go to log (debug), never to the
// body. The body is at most 1 KiB.
func Evaluate(kind string, checks []Check, verbose bool, exclude []string, log *initlog.Logger) (int, []byte) {
	code, body := evaluate(kind, checks, verbose, exclude, log)
	return code, []byte(body)
}

// evaluate is Evaluate returning a string, so that the common answer (all
// checks pass, "ok") allocates nothing.
func evaluate(kind string, checks []Check, verbose bool, exclude []string, log *initlog.Logger) (int, string) {
	var excluded map[string]bool
	for _, e := range exclude {
		for n := range strings.SplitSeq(e, ",") {
			if n = strings.TrimSpace(n); n != "" {
				if excluded == nil {
					excluded = make(map[string]bool)
				}
				excluded[n] = true
			}
		}
	}
	// Each check runs once; its outcome is kept for the body. Up to 16
	// outcomes live on the stack.
	var buf [16]int8
	outcome := buf[:0] // 0 passed, 1 failed, 2 excluded
	failed := false
	for _, c := range checks {
		if excluded[c.Name] {
			// One exclusion per name: a second check of the same name
			// runs (as it always has).
			outcome = append(outcome, 2)
			delete(excluded, c.Name)
			continue
		}
		if err := c.Fn(); err != nil {
			failed = true
			outcome = append(outcome, 1)
			if log != nil {
				log.Debug("probe check failed", "probe", kind, "check", c.Name, "reason", err.Error())
			}
			continue
		}
		outcome = append(outcome, 0)
	}
	if !failed && !verbose {
		return statusOK, "ok"
	}
	var b strings.Builder
	for i, c := range checks {
		switch outcome[i] {
		case 2:
			b.WriteString("[+]" + c.Name + " excluded: ok\n")
		case 1:
			b.WriteString("[-]" + c.Name + " failed: reason withheld\n")
		default:
			b.WriteString("[+]" + c.Name + " ok\n")
		}
	}
	// Sorted, so that the body does not depend on map order.
	for _, n := range slices.Sorted(maps.Keys(excluded)) {
		b.WriteString("warn: some health checks cannot be excluded: no matches for \"" + truncate(n, 64) + "\"\n")
	}
	code := statusOK
	verdict := kind + " check passed\n"
	if failed {
		code = statusServiceUnavailable
		verdict = kind + " check failed\n"
	}
	out := b.String()
	if len(out)+len(verdict) > maxBody {
		out = out[:maxBody-len(verdict)]
	}
	return code, out + verdict
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
