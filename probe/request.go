package probe

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Bounds of one request head (request line and header fields).
const (
	// maxHead is the most bytes of request line, header lines and the
	// empty line ending them, line endings included. The kubelet sends
	// about 120; 4 KiB leaves room for custom probe headers and is the
	// size of the connection's read buffer.
	maxHead = 4 << 10
	// maxFields is the most header fields one request may have.
	maxFields = 100
	// maxDiscard is the largest request body (Content-Length, bytes)
	// read and thrown away to keep the connection; a larger one is 413.
	// Probes have no body.
	maxDiscard = 4 << 10
)

// request is what the server keeps of one request head.
type request struct {
	method   string // a token (RFC 9110 §9.1), e.g. "GET"
	target   string // request-target as sent (RFC 9112 §3.2)
	path     string // percent-decoded path of the target, "" for authority- and asterisk-form
	rawQuery string // the target's query, undecoded, without '?'
	minor    int    // HTTP/1.minor; 2..9 are handled as 1.1 (RFC 9110 §2.5)
	close    bool   // the connection closes after the response: Connection: close, or HTTP/1.0
	bodyLen  int    // Content-Length, 0..maxDiscard; the caller discards it
	expect   bool   // HTTP/1.1 Expect: 100-continue with a body: answer without reading the body, then close
}

// requestError is a request that is refused with status and the
// connection closed. reason is a fixed text (never a byte of the
// request), sent in the body and logged at debug.
type requestError struct {
	status int
	reason string
}

func (e *requestError) Error() string { return e.reason }

func refuse(status int, reason string) *requestError {
	return &requestError{status: status, reason: reason}
}

// readRequest reads one request head from br, whose buffer must hold at
// least maxHead bytes, and checks it against RFC 9112. It returns
// io.EOF at a clean end before any byte (how a keep-alive connection
// ends), io.ErrUnexpectedEOF at an
// end inside the head, a read error as it is (a deadline, a reset), or a
// *requestError for a request to refuse. On a *requestError the returned
// request has as much as was parsed (its method, for HEAD). It reads
// nothing past the head.
func readRequest(br *bufio.Reader) (request, error) {
	var req request
	used := 0 // bytes of the head so far, against maxHead
	line, err := readRequestLine(br, &used)
	if err != nil {
		return req, err
	}
	if err := parseRequestLine(&req, line); err != nil {
		return req, err
	}
	h, err := readHeaders(br, &used, &req)
	if err != nil {
		return req, err
	}
	if err := h.check(&req); err != nil {
		return req, err
	}
	return req, nil
}

// readRequestLine returns the first line of br that is not empty: a server
// should ignore at least one empty line before the request line
// (RFC 9112 §2.2), as some clients send CRLF after a body. All count
// against maxHead.
func readRequestLine(br *bufio.Reader, used *int) ([]byte, error) {
	for {
		line, err := readLine(br, used, true)
		if err != nil || len(line) > 0 {
			return line, err
		}
	}
}

// headers is what readHeaders tallies of the header fields for check,
// which judges them together: the framing rules span several fields.
type headers struct {
	host     int   // Host fields seen
	clSeen   bool  // a Content-Length field was seen
	cl       int64 // its value
	clDigits int   // its length in digits
	te       bool  // a Transfer-Encoding field was seen
}

// readHeaders reads the header lines up to the empty line ending the
// head, refusing a malformed one, and sets req.close and req.expect from
// them as they come.
func readHeaders(br *bufio.Reader, used *int, req *request) (headers, error) {
	var h headers
	for fields := 1; ; fields++ {
		line, err := readLine(br, used, false)
		if err != nil {
			return h, err
		}
		if len(line) == 0 {
			return h, nil
		}
		if fields > maxFields {
			return h, refuse(statusHeaderTooLarge, "too many header fields")
		}
		name, value, err := splitField(line)
		if err != nil {
			return h, err
		}
		if err := h.add(req, name, value); err != nil {
			return h, err
		}
	}
}

// splitField splits a header line into its name and value (RFC 9112 §5),
// the value without its optional whitespace, or refuses the line.
func splitField(line []byte) (name, value []byte, err error) {
	if line[0] == ' ' || line[0] == '\t' {
		// obs-fold: a server must reject it or unfold it
		// (RFC 9112 §5.2); no prober folds.
		return nil, nil, refuse(statusBadRequest, "obsolete line folding")
	}
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return nil, nil, refuse(statusBadRequest, "header line without colon")
	}
	name, value = line[:colon], trimOWS(line[colon+1:])
	// No whitespace between name and colon (RFC 9112 §5.1): a
	// non-token byte in the name catches it.
	if !isToken(name) {
		return nil, nil, refuse(statusBadRequest, "malformed header name")
	}
	if !isFieldValue(value) {
		return nil, nil, refuse(statusBadRequest, "control character in header value")
	}
	return name, value, nil
}

// add takes in one header field: the few the server acts on are tallied
// in h or set in req; the others are ignored.
func (h *headers) add(req *request, name, value []byte) error {
	switch {
	case bytes.EqualFold(name, []byte("host")):
		h.host++
	case bytes.EqualFold(name, []byte("connection")):
		if hasToken(value, "close") {
			req.close = true
		}
	case bytes.EqualFold(name, []byte("content-length")):
		n, ok := parseContentLength(value)
		if !ok {
			return refuse(statusBadRequest, "malformed Content-Length")
		}
		// Repeated fields must agree (RFC 9112 §6.3 item 5);
		// like net/http, "3" and "003" do not (same value and
		// length means same digits).
		if h.clSeen && (n != h.cl || len(value) != h.clDigits) {
			return refuse(statusBadRequest, "conflicting Content-Length")
		}
		h.clSeen, h.cl, h.clDigits = true, n, len(value)
	case bytes.EqualFold(name, []byte("transfer-encoding")):
		h.te = true
	case bytes.EqualFold(name, []byte("expect")):
		if req.minor == 0 {
			// An HTTP/1.0 server ignores Expect (RFC 9110 §10.1.1).
			break
		}
		if !bytes.EqualFold(value, []byte("100-continue")) {
			return refuse(statusExpectationFailed, "unsupported expectation")
		}
		req.expect = true
	}
	return nil
}

// check judges the head as a whole once all its fields are in (Host
// count, body framing) and sets req.bodyLen, and req.expect and req.close
// where the body and the version decide them.
func (h *headers) check(req *request) error {
	// HTTP/1.1 requires exactly one Host (RFC 9112 §3.2).
	if req.minor >= 1 && h.host != 1 {
		return refuse(statusBadRequest, "HTTP/1.1 request needs exactly one Host header")
	}
	if req.minor == 0 && h.host > 1 {
		return refuse(statusBadRequest, "more than one Host header")
	}
	switch {
	case h.te && h.clSeen:
		// Both framings: the classic request-smuggling ambiguity
		// (RFC 9112 §6.3 item 3).
		return refuse(statusBadRequest, "both Transfer-Encoding and Content-Length")
	case h.te:
		// Chunked bodies are never sent by probers; 501 for a transfer
		// coding the server does not implement (RFC 9112 §6.1).
		return refuse(statusNotImplemented, "Transfer-Encoding not supported")
	case h.cl > maxDiscard:
		return refuse(statusContentTooLarge, "request body too large")
	}
	req.bodyLen = int(h.cl)
	if req.bodyLen == 0 {
		req.expect = false
	}
	if req.minor == 0 {
		// HTTP/1.0 keep-alive is an old extension; closing is always
		// correct (RFC 9112 §9.3).
		req.close = true
	}
	return nil
}

// readLine returns the next line from br without its LF or CRLF and adds
// its length to *used. A bare LF ends a line too, as net/http and most
// servers accept (RFC 9112 §2.2 allows it). A line that does not fit the
// rest of the maxHead budget is 414 for the request line, 431 otherwise.
func readLine(br *bufio.Reader, used *int, first bool) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	*used += len(line)
	if *used > maxHead || errors.Is(err, bufio.ErrBufferFull) {
		if first {
			return nil, refuse(statusURITooLong, "request line too long")
		}
		return nil, refuse(statusHeaderTooLarge, "request head too large")
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			if *used == 0 {
				return nil, io.EOF
			}
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// parseRequestLine parses "method SP request-target SP HTTP-version"
// (RFC 9112 §3) into req, with single spaces as the grammar has them.
func parseRequestLine(req *request, line []byte) error {
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 <= 0 {
		return refuse(statusBadRequest, "malformed request line")
	}
	method := line[:sp1]
	if !isToken(method) {
		return refuse(statusBadRequest, "malformed method")
	}
	// The common methods without an allocation.
	switch string(method) {
	case "GET":
		req.method = "GET"
	case "HEAD":
		req.method = "HEAD"
	default:
		req.method = string(method)
	}
	rest := line[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 <= 0 {
		return refuse(statusBadRequest, "malformed request line")
	}
	target, version := rest[:sp2], rest[sp2+1:]
	// HTTP-version is case-sensitive "HTTP/" DIGIT "." DIGIT
	// (RFC 9112 §2.3).
	if len(version) != 8 || string(version[:5]) != "HTTP/" || !isDigit(version[5]) || version[6] != '.' || !isDigit(version[7]) {
		return refuse(statusBadRequest, "malformed HTTP version")
	}
	if version[5] != '1' {
		// HTTP/2's connection preface ("PRI * HTTP/2.0") lands here:
		// this server speaks HTTP/1.x only.
		return refuse(statusVersionNotSupported, "HTTP version not supported")
	}
	req.minor = int(version[7] - '0')
	for _, c := range target {
		// No CTL, space or DEL in a target; bytes above 0x7f are let
		// through (they only ever fail to match a path).
		if c <= ' ' || c == 0x7f {
			return refuse(statusBadRequest, "malformed request target")
		}
	}
	req.target = string(target)
	return splitTarget(req)
}

// splitTarget fills req.path and req.rawQuery from req.target, in the forms
// of RFC 9112 §3.2: origin-form ("/livez?verbose", what the kubelet
// sends), absolute-form ("http://host:9898/livez", what a proxy sends; the
// authority is ignored), asterisk-form ("*") and, for CONNECT only,
// authority-form. Anything else is 400. The path is percent-decoded; an
// invalid escape in it is 400.
func splitTarget(req *request) error {
	t := req.target
	switch {
	case t[0] == '/':
	case t == "*":
		req.path = "*"
		return nil
	case req.method == "CONNECT":
		return nil
	default:
		rest, ok := cutScheme(t)
		if !ok {
			return refuse(statusBadRequest, "malformed request target")
		}
		// Skip the authority; an absolute URI without a path means "/".
		i := 0
		for i < len(rest) && rest[i] != '/' && rest[i] != '?' {
			i++
		}
		t = rest[i:]
		if t == "" || t[0] == '?' {
			t = "/" + t
		}
	}
	path, query, _ := cutByte(t, '?')
	p, ok := unescape(path, false)
	if !ok {
		return refuse(statusBadRequest, "malformed escape in path")
	}
	req.path, req.rawQuery = p, query
	return nil
}

// cutScheme cuts `scheme "://"` (RFC 3986 §3.1: a letter, then letters,
// digits, '+', '-', '.') from the front of t.
func cutScheme(t string) (rest string, ok bool) {
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && (isDigit(c) || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			rest = t[i+1:]
			if len(rest) >= 2 && rest[0] == '/' && rest[1] == '/' {
				return rest[2:], true
			}
			return "", false
		default:
			return "", false
		}
	}
	return "", false
}

func cutByte(s string, c byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// parseContentLength accepts 1*DIGIT (RFC 9110 §8.6), at most 18 digits
// so that it cannot overflow; no sign, no list.
func parseContentLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated list v holds tok, compared
// case-insensitively (Connection options, RFC 9110 §7.6.1).
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var item []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			item, v = v[:i], v[i+1:]
		} else {
			item, v = v, nil
		}
		if bytes.EqualFold(trimOWS(item), []byte(tok)) {
			return true
		}
	}
	return false
}

// trimOWS trims optional whitespace, SP and HTAB (RFC 9110 §5.6.3).
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// isToken reports whether b is a non-empty token: tchar, RFC 9110 §5.6.2.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !isTchar(c) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) {
		return true
	}
	switch c {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}

// isFieldValue reports whether b is a field value of RFC 9110 §5.5:
// visible ASCII, SP, HTAB and obs-text (0x80–0xff); no other control
// character (NUL, a bare CR, DEL).
func isFieldValue(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
