package podapi

// The HTTP/1.1 client of DeleteSelf, written by hand on crypto/tls and net
// so that PID 1 does not link net/http (about 3.3 MB of a static binary)
// for its one API call. It sends one request per connection
// ("Connection: close") and reads one answer with hard bounds on what it
// takes from the connection. Message syntax: RFC 9112 (HTTP/1.1) and
// RFC 9110 (HTTP semantics); the sections are cited next to the code.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/warmpod/warmpod/internal/sockdial"
)

const (
	// maxHeaderBytes bounds the status lines and header fields of one answer,
	// interim 1xx answers included, line ends included. Beyond it the answer
	// is an error: the API server's headers are a few hundred bytes.
	maxHeaderBytes = 16 << 10
	// maxBodyToRead is the most of a body kept; reading stops there (the
	// body only serves the metav1.Status message, well under 1 KiB).
	maxBodyToRead = 16 << 10
	// maxChunkFraming bounds the chunk-size lines, chunk extensions, CRLFs
	// after chunk data and trailer fields of a chunked body, together.
	maxChunkFraming = 4 << 10
	// maxResponseRead is the most taken from the connection for one answer.
	// The parser never consumes more than the three bounds above add up to,
	// and its read-ahead buffer sits on a reader cut at this size, so that a
	// server cannot make it read more even through the buffer.
	maxResponseRead = maxHeaderBytes + maxBodyToRead + maxChunkFraming
	// readBufferSize is the read-ahead buffer. Lines longer than it are
	// taken in several pieces, still within maxHeaderBytes.
	readBufferSize = 4 << 10
)

// endpoint is where the request goes, from Config.Host.
type endpoint struct {
	addr       string         // host:port to dial; an IPv6 host is bracketed
	ip         netip.AddrPort // addr when the host is an IP address (invalid for a name)
	serverName string         // TLS ServerName: a DNS name or an IP without brackets
	authority  string         // value of the Host header: host[:port] as in Config.Host
}

// parseHost reads Config.Host, "https://" host [":" port] with an optional
// trailing "/", the form client-go's InClusterConfig builds
// ("https://" + net.JoinHostPort(host, port)). The host is a DNS name, an
// IPv4 address, or an IPv6 address in brackets (RFC 3986 §3.2.2); the port
// defaults to 443. Anything else (another scheme, userinfo, a path, a query,
// a percent sign, a control byte) is an error, so the Host header built from
// it can carry nothing but the authority.
func parseHost(h string) (endpoint, error) {
	bad := func(why string) (endpoint, error) {
		return endpoint{}, fmt.Errorf("self-deletion: API server host %q is not https://HOST[:PORT]: %s", h, why)
	}
	const scheme = "https://"
	// The scheme is case-insensitive (RFC 3986 §3.1).
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return bad("the scheme must be https")
	}
	auth := strings.TrimSuffix(h[len(scheme):], "/")
	var host, port string
	if strings.HasPrefix(auth, "[") {
		end := strings.IndexByte(auth, ']')
		if end < 0 {
			return bad("no ] after an IPv6 address")
		}
		host = auth[1:end]
		if ip := net.ParseIP(host); ip == nil || !strings.Contains(host, ":") {
			return bad("only an IPv6 address goes in brackets")
		}
		rest := auth[end+1:]
		if rest != "" {
			if rest[0] != ':' {
				return bad("unexpected text after the IPv6 address")
			}
			if port = rest[1:]; port == "" {
				return bad("empty port")
			}
		}
	} else {
		var found bool
		host, port, found = strings.Cut(auth, ":")
		if found && port == "" {
			return bad("empty port")
		}
		if strings.Contains(port, ":") {
			return bad("an IPv6 address must be in brackets")
		}
		if host == "" {
			return bad("empty host")
		}
		for i := 0; i < len(host); i++ {
			// DNS names and IPv4 addresses only: letters, digits, "-", "." (and
			// "_", which some internal DNS names carry).
			if ch := host[i]; !isAlnum(ch) && ch != '-' && ch != '.' && ch != '_' {
				return bad(fmt.Sprintf("byte %q not allowed in a host name", ch))
			}
		}
	}
	if port == "" {
		port = "443"
	} else if n, err := strconv.Atoi(port); err != nil || len(port) > 5 || n < 1 || n > 65535 || !allDigits(port) {
		return bad("the port must be a number from 1 to 65535 (and no path follows it)")
	}
	ep := endpoint{addr: net.JoinHostPort(host, port), serverName: host, authority: auth}
	if a, err := netip.ParseAddr(host); err == nil {
		n, _ := strconv.Atoi(port)
		ep.ip = netip.AddrPortFrom(a, uint16(n))
	}
	return ep, nil
}

// escapeSegment percent-encodes every byte of s outside RFC 3986's
// unreserved set (ALPHA / DIGIT / "-" / "." / "_" / "~", §2.3), so that s is
// one path segment whatever it holds. Namespaces and pod names are DNS
// labels and subdomains and need none of it; this is a defence against a
// downward-API value that is not.
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if isAlnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~' {
			b.WriteByte(ch)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[ch>>4])
		b.WriteByte(hex[ch&15])
	}
	return b.String()
}

// podPath is the path of the pod object (API reference: "delete" of Pod v1,
// DELETE /api/v1/namespaces/{namespace}/pods/{name}). "." and ".." are
// refused: RFC 3986 §5.2.4 would remove them as dot-segments, and neither is
// a valid namespace or pod name.
func podPath(p Identity) (string, error) {
	for _, s := range []string{p.Namespace, p.Name} {
		if s == "." || s == ".." {
			return "", fmt.Errorf("self-deletion: %q is not a valid namespace or pod name", s)
		}
	}
	return "/api/v1/namespaces/" + escapeSegment(p.Namespace) + "/pods/" + escapeSegment(p.Name), nil
}

// buildRequest returns the exact bytes of the request (RFC 9112 §3 request
// line, §5 field lines, §6.2 Content-Length; CRLF line ends):
//
//	DELETE /api/v1/namespaces/{ns}/pods/{name} HTTP/1.1\r\n
//	Host: {authority of Config.Host}\r\n
//	Authorization: Bearer {token}\r\n
//	Content-Type: application/json\r\n
//	Accept: application/json\r\n
//	User-Agent: warmpod\r\n
//	Content-Length: {len(body)}\r\n
//	Connection: close\r\n
//	\r\n
//	{body}
//
// "Connection: close" (RFC 9112 §9.6): one request per connection, so the
// answer's end is never needed to reuse the connection and a body can be
// left half read. A field value with a control byte other than HTAB
// (RFC 9110 §5.5; CR or LF would start a new header line or end the
// header section) is an error and nothing is built; the error names the
// field and the offset of the byte, never the value (it may be the token).
func buildRequest(authority, path, token string, body []byte) ([]byte, error) {
	fields := [...]struct{ name, value, what string }{
		{"Host", authority, "the API server host"},
		{"Authorization", "Bearer " + token, "the token"},
		{"Content-Type", "application/json", ""},
		{"Accept", "application/json", ""},
		{"User-Agent", "warmpod", ""},
		{"Content-Length", strconv.Itoa(len(body)), ""},
		{"Connection", "close", ""},
	}
	var b bytes.Buffer
	b.WriteString("DELETE " + path + " HTTP/1.1\r\n")
	for _, f := range fields {
		if i := controlByte(f.value); i >= 0 {
			off := i
			if f.name == "Authorization" {
				off -= len("Bearer ")
			}
			return nil, fmt.Errorf("self-deletion: %s holds control byte 0x%02x at offset %d, which would corrupt the %s header; nothing sent",
				f.what, f.value[i], off, f.name)
		}
		b.WriteString(f.name + ": " + f.value + "\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes(), nil
}

// controlByte is the index of the first byte of v that RFC 9110 §5.5 does
// not allow in a field value (a control byte other than HTAB, or DEL), or -1.
func controlByte(v string) int {
	for i := 0; i < len(v); i++ {
		if ch := v[i]; (ch < 0x20 && ch != '\t') || ch == 0x7f {
			return i
		}
	}
	return -1
}

// tlsDial is the production Config.Dial: TCP to ep.addr, then a TLS
// handshake verified against pool only (the cluster CA of client-go's
// InClusterConfig), TLS 1.2 at least, ServerName ep.serverName, ALPN
// "http/1.1" alone so that the server never picks HTTP/2 (crypto/tls itself
// refuses a server that selects a protocol not offered). The dial and the
// handshake end at ctx's deadline (the try's) or when ctx ends; timeout
// bounds the dial when ctx has no deadline.
func tlsDial(pool *x509.CertPool, ep endpoint, timeout time.Duration) func(context.Context) (net.Conn, error) {
	return func(ctx context.Context) (net.Conn, error) {
		// The API server is dialled by IP (sockdial: no resolver in PID
		// 1). No proxy either: HTTPS_PROXY is a net/http feature, and an
		// in-cluster client must not go through one.
		// DeleteSelf refuses a name before it gets here.
		raw, err := sockdial.TCP(ctx, ep.ip, timeout)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			// HandshakeContext watches ctx too; the deadline also covers a
			// server that accepts and then stays silent.
			_ = raw.SetDeadline(dl)
		}
		conn := tls.Client(raw, &tls.Config{
			RootCAs:    pool,
			MinVersion: tls.VersionTLS12,
			// For an IP, crypto/tls sends no SNI and crypto/x509 checks the
			// certificate's IP SANs (the kube-apiserver certificate lists the
			// service IP); for a name, its DNS SANs. Never the Common Name.
			ServerName: ep.serverName,
			NextProtos: []string{"http/1.1"},
		})
		if err := conn.HandshakeContext(ctx); err != nil {
			_ = raw.Close()
			return nil, err
		}
		return conn, nil
	}
}

// roundTrip is one try: dial, write req, read the answer, close, all before
// the earlier of now+timeout and ctx's deadline. The returned error is a
// network, TLS or malformed-answer error (DeleteSelf retries all but
// certificate errors); an answer with a body error is not an error (the
// status line decides; see readResponse).
func roundTrip(ctx context.Context, dial func(context.Context) (net.Conn, error), timeout time.Duration, req []byte) (answer, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := dial(ctx)
	if err != nil {
		return answer{}, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return answer{}, err
	}
	// A Read or Write blocked on a silent server returns as soon as ctx ends
	// (the caller's cancellation, not only the deadline): a deadline in the
	// past wakes it.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return answer{}, fmt.Errorf("sending the request: %w", err)
	}
	a, err := readResponse(conn)
	if err != nil {
		return answer{}, fmt.Errorf("reading the answer: %w", err)
	}
	return a, nil
}

// answer is what DeleteSelf uses of the API server's final response.
type answer struct {
	code       int    // status code, 200 to 599 (1xx answers are skipped)
	retryAfter string // Retry-After field value, "" when absent
	body       []byte // the body, at most maxBodyToRead bytes of it
	// bodyErr says why the body could not be read to its end (or to
	// maxBodyToRead): cut short, bad chunk framing, timeout. The status
	// stands anyway, as it did with net/http: the body is only the message.
	bodyErr error
}

// bodyKind is how the end of a body is found (RFC 9112 §6.3).
type bodyKind int

const (
	bodyNone    bodyKind = iota // 1xx, 204, 304: no body whatever the fields say
	bodyLength                  // Content-Length bytes
	bodyChunked                 // chunked transfer coding (RFC 9112 §7.1)
	bodyToClose                 // until the server closes the connection
)

// errMalformed marks an answer that is not HTTP/1.x; DeleteSelf retries it
// like a network error.
var errMalformed = errors.New("malformed answer")

// readResponse reads one answer to the request from r (RFC 9112): interim
// 1xx answers are skipped (RFC 9110 §15.2: a client must accept them even
// unasked), then the final answer's status line, header fields and body.
//
// Bounds: at most maxResponseRead bytes are taken from r; the header
// sections (all of them, interim ones included) may total maxHeaderBytes,
// beyond which the answer is an error; of the body, at most maxBodyToRead
// bytes are read and kept, the rest is left unread.
//
// Errors wrap errMalformed when the head is not valid HTTP/1.x (status line,
// field syntax, Content-Length, 101 unasked, header bound), or are the
// reader's errors (EOF before the end of the head, timeouts). Problems of the
// body are not errors but answer.bodyErr.
func readResponse(r io.Reader) (answer, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxResponseRead), readBufferSize)
	headBudget := maxHeaderBytes
	for first := true; ; first = false {
		a, kind, length, err := readHead(br, &headBudget, first)
		if err != nil {
			return answer{}, err
		}
		switch {
		case a.code == 101:
			// Switching Protocols answers an Upgrade, and none was sent
			// (RFC 9110 §15.2.2).
			return answer{}, fmt.Errorf("%w: 101 Switching Protocols without an Upgrade request", errMalformed)
		case a.code < 200:
			continue // 100 Continue, 102, 103 Early Hints: the final answer follows
		}
		a.body, a.bodyErr = readBody(br, kind, length)
		return a, nil
	}
}

// readHead reads a status line and the header section after it (RFC 9112
// §2.1: start-line *( field-line CRLF ) CRLF) and decides how the body ends
// (§6.3). Only Content-Length, Transfer-Encoding and Retry-After are kept;
// every field line is still checked for syntax.
func readHead(br *bufio.Reader, budget *int, first bool) (a answer, kind bodyKind, length int64, err error) {
	line, err := readLine(br, budget, "header section")
	switch {
	case err == nil:
	case first && errors.Is(err, io.EOF):
		return a, 0, 0, errors.New("connection closed without an answer")
	case errors.Is(err, io.EOF):
		return a, 0, 0, fmt.Errorf("answer cut short after an interim 1xx answer: %w", io.ErrUnexpectedEOF)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return a, 0, 0, fmt.Errorf("answer cut short in its status line %s: %w", quoteStart(line), err)
	default:
		return a, 0, 0, err
	}
	minor, code, err := parseStatusLine(line)
	if err != nil {
		return a, 0, 0, err
	}
	a.code = code
	var contentLength, transferEncoding []string
	var last *string // the kept field an obs-fold continues; nil: an ignored one
	seenField := false
	for {
		line, err := readLine(br, budget, "header section")
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return a, 0, 0, fmt.Errorf("answer cut short in its header section: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			return a, 0, 0, err
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// obs-fold (RFC 9112 §5.2): a user agent replaces it with SP.
			// Before any field it is whitespace after the start line, which
			// §2.2 lets a recipient reject.
			if !seenField {
				return a, 0, 0, fmt.Errorf("%w: whitespace before the first header field", errMalformed)
			}
			if last != nil {
				v, err := fieldValue(line)
				if err != nil {
					return a, 0, 0, err
				}
				*last += " " + v
			}
			continue
		}
		name, rawValue, ok := bytes.Cut(line, []byte(":"))
		// field-name = token (RFC 9110 §5.1); whitespace before the colon is
		// an error (RFC 9112 §5.1), which the token check catches.
		if !ok || !isToken(name) {
			return a, 0, 0, fmt.Errorf("%w: bad header field line %s", errMalformed, quoteStart(line))
		}
		value, err := fieldValue(rawValue)
		if err != nil {
			return a, 0, 0, err
		}
		seenField = true
		last = nil
		switch {
		case asciiEqualFold(name, "Content-Length"):
			contentLength = append(contentLength, value)
			last = &contentLength[len(contentLength)-1]
		case asciiEqualFold(name, "Transfer-Encoding"):
			transferEncoding = append(transferEncoding, value)
			last = &transferEncoding[len(transferEncoding)-1]
		case asciiEqualFold(name, "Retry-After"):
			a.retryAfter = value
			last = &a.retryAfter
		}
	}
	kind, length, err = bodyFraming(minor, code, contentLength, transferEncoding)
	if err != nil {
		return a, 0, 0, err
	}
	return a, kind, length, nil
}

// bodyFraming decides how the body of an HTTP/1.minor answer with status
// code ends (RFC 9112 §6.3), from the values of its Content-Length and
// Transfer-Encoding fields, each in the order received. length is the
// Content-Length of a bodyLength body.
func bodyFraming(minor, code int, contentLength, transferEncoding []string) (kind bodyKind, length int64, err error) {
	switch {
	case code < 200 || code == 204 || code == 304:
		return bodyNone, 0, nil // §6.3 rule 1
	case len(transferEncoding) > 0:
		// §6.3 rule 3: Transfer-Encoding overrides Content-Length (this
		// connection is closed after the answer, so nothing can be smuggled
		// into a next one). §6.1: in an HTTP/1.0 answer the framing is
		// faulty: read to the close. §6.3 rule 4: chunked must be the final
		// coding, otherwise the body lasts until the close.
		if minor == 0 || !finalCodingIsChunked(strings.Join(transferEncoding, ",")) {
			return bodyToClose, 0, nil
		}
		return bodyChunked, 0, nil
	case len(contentLength) > 0:
		n, err := parseContentLength(contentLength)
		if err != nil {
			return 0, 0, err // §6.3 rule 5: an unrecoverable error
		}
		return bodyLength, n, nil
	default:
		return bodyToClose, 0, nil // §6.3 rule 8
	}
}

// parseStatusLine reads RFC 9112 §4 status-line = HTTP-version SP
// status-code SP [ reason-phrase ], HTTP-version = "HTTP/" DIGIT "." DIGIT
// (§2.3, case-sensitive). Only major version 1 is HTTP/1.x; the status code
// is three digits from 100 to 599 (RFC 9110 §15). The SP after the code is
// also accepted missing, as the reason phrase is unused.
func parseStatusLine(line []byte) (minor, code int, err error) {
	if len(line) < len("HTTP/1.1 200") || string(line[:7]) != "HTTP/1." || !isDigit(line[7]) || line[8] != ' ' ||
		!isDigit(line[9]) || !isDigit(line[10]) || !isDigit(line[11]) || (len(line) > 12 && line[12] != ' ') {
		return 0, 0, fmt.Errorf("%w: status line %s is not HTTP/1.x NNN reason", errMalformed, quoteStart(line))
	}
	code = int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	if code < 100 || code > 599 {
		return 0, 0, fmt.Errorf("%w: status code %d out of 100..599", errMalformed, code)
	}
	return int(line[7] - '0'), code, nil
}

// fieldValue trims the optional whitespace around a field value (RFC 9112
// §5.1: field-line = field-name ":" OWS field-value OWS) and refuses NUL,
// which RFC 9110 §5.5 lets a recipient reject (CR alone was refused by
// readLine, LF ends the line).
func fieldValue(raw []byte) (string, error) {
	v := bytes.Trim(raw, " \t")
	if bytes.IndexByte(v, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in a header field value", errMalformed)
	}
	return string(v), nil
}

// parseContentLength reads the Content-Length field lines of an answer
// (RFC 9110 §8.6: 1*DIGIT; a list of identical values, or several identical
// lines, may be taken as that one value). Anything else is an error wrapping
// errMalformed.
func parseContentLength(lines []string) (int64, error) {
	n := int64(-1)
	for _, line := range lines {
		for v := range strings.SplitSeq(line, ",") {
			v = strings.Trim(v, " \t")
			m, err := strconv.ParseInt(v, 10, 64)
			if err != nil || !allDigits(v) {
				return 0, fmt.Errorf("%w: bad Content-Length %s", errMalformed, quoteStart([]byte(line)))
			}
			if n >= 0 && m != n {
				return 0, fmt.Errorf("%w: conflicting Content-Length values %s", errMalformed, quoteStart([]byte(strings.Join(lines, ","))))
			}
			n = m
		}
	}
	return n, nil
}

// finalCodingIsChunked says whether the last transfer coding of a
// Transfer-Encoding list (RFC 9112 §6.1; names are case-insensitive, §7) is
// chunked. Coding parameters (";...") are ignored.
func finalCodingIsChunked(te string) bool {
	codings := strings.Split(te, ",")
	lastCoding := ""
	for _, c := range codings {
		if c = strings.Trim(c, " \t"); c != "" {
			lastCoding = c
		}
	}
	name, _, _ := strings.Cut(lastCoding, ";")
	return strings.EqualFold(strings.Trim(name, " \t"), "chunked")
}

// readBody reads the body of kind, at most maxBodyToRead bytes of it. The
// error says why it stopped before the end (not at maxBodyToRead).
func readBody(br *bufio.Reader, kind bodyKind, length int64) ([]byte, error) {
	switch kind {
	case bodyLength:
		buf := make([]byte, min(length, maxBodyToRead))
		n, err := io.ReadFull(br, buf)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("body ended after %d of %d bytes", n, length)
			}
			return buf[:n], err
		}
		return buf, nil
	case bodyChunked:
		return readChunked(br)
	case bodyToClose:
		// The end of the body is the end of the connection (RFC 9112 §6.3
		// rule 8); EOF is its normal end.
		return io.ReadAll(io.LimitReader(br, maxBodyToRead))
	default:
		return nil, nil
	}
}

// readChunked decodes a chunked body (RFC 9112 §7.1):
//
//	chunked-body = *chunk last-chunk trailer-section CRLF
//	chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//	last-chunk   = 1*("0") [ chunk-ext ] CRLF
//
// Chunk extensions are ignored (§7.1.1), trailer fields read and dropped
// (§7.1.2). It stops once maxBodyToRead bytes of data are in, and when the
// framing (size lines, CRLFs, trailers) passes maxChunkFraming. A body that
// ends before its last chunk and trailer section is io.ErrUnexpectedEOF.
func readChunked(br *bufio.Reader) ([]byte, error) {
	body, err := readChunks(br)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("chunked body cut short: %w", io.ErrUnexpectedEOF)
	}
	return body, err
}

func readChunks(br *bufio.Reader) ([]byte, error) {
	var body []byte
	framing := maxChunkFraming
	for {
		line, err := readLine(br, &framing, "chunk framing")
		if err != nil {
			return body, err
		}
		size, err := parseChunkSize(line)
		if err != nil {
			return body, err
		}
		if size == 0 {
			// The trailer section: field lines up to an empty line.
			for {
				line, err := readLine(br, &framing, "chunk framing")
				if err != nil {
					return body, err
				}
				if len(line) == 0 {
					return body, nil
				}
				if name, _, ok := bytes.Cut(line, []byte(":")); !ok || !isToken(name) {
					return body, fmt.Errorf("bad trailer field line %s", quoteStart(line))
				}
			}
		}
		take := min(size, int64(maxBodyToRead-len(body)))
		start := len(body)
		body = append(body, make([]byte, take)...)
		if n, err := io.ReadFull(br, body[start:]); err != nil {
			return body[:start+n], err
		}
		if len(body) == maxBodyToRead {
			return body, nil // enough for the message; the rest stays unread
		}
		// take == size here: chunk-data is followed by CRLF.
		line, err = readLine(br, &framing, "chunk framing")
		if err != nil {
			return body, err
		}
		if len(line) != 0 {
			return body, errors.New("no CRLF after chunk data")
		}
	}
}

// parseChunkSize reads chunk-size [ chunk-ext ] (RFC 9112 §7.1, §7.1.1:
// chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )).
// Sizes of more than 15 hex digits are refused (they would overflow int64;
// nothing that large is read anyway). The extensions are only checked to
// start with ";" after optional whitespace.
func parseChunkSize(line []byte) (int64, error) {
	i := 0
	for i < len(line) && isHex(line[i]) {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("bad chunk size line %s", quoteStart(line))
	}
	digits := line[:i]
	if trimmed := bytes.TrimLeft(digits, "0"); len(trimmed) > 15 {
		return 0, fmt.Errorf("chunk size %s too large", quoteStart(digits))
	}
	if rest := bytes.TrimLeft(line[i:], " \t"); len(rest) > 0 && rest[0] != ';' {
		return 0, fmt.Errorf("bad chunk size line %s", quoteStart(line))
	}
	n, err := strconv.ParseInt(string(digits), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("bad chunk size %s", quoteStart(digits))
	}
	return n, nil
}

// readLine returns the next line without its end. LF ends a line, and a CR
// before it is dropped (RFC 9112 §2.2 lets a recipient accept a bare LF); a
// CR anywhere else is refused (§2.2: a bare CR is invalid). Every byte taken,
// line end included, is charged to *budget; a line that does not fit is an
// error naming what, wrapping errMalformed. EOF before any byte is io.EOF;
// EOF inside a line is io.ErrUnexpectedEOF, returned with the partial line.
func readLine(br *bufio.Reader, budget *int, what string) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) > *budget {
			*budget = 0
			return nil, fmt.Errorf("%w: %s longer than its bound", errMalformed, what)
		}
		*budget -= len(frag)
		line = append(line, frag...)
		if err == nil {
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return line, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	line = bytes.TrimSuffix(line, []byte("\r"))
	if bytes.IndexByte(line, '\r') >= 0 {
		return nil, fmt.Errorf("%w: bare CR in a line", errMalformed)
	}
	return line, nil
}

// quoteStart quotes the first 64 bytes of b for an error message, so that a
// garbage answer neither floods the log nor breaks its line.
func quoteStart(b []byte) string {
	if len(b) > 64 {
		return strconv.Quote(string(b[:64])) + "..."
	}
	return strconv.Quote(string(b))
}

// isToken says whether b is an RFC 9110 §5.6.2 token: 1*tchar, tchar being
// "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" /
// "`" / "|" / "~" / DIGIT / ALPHA.
func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, ch := range b {
		if !isAlnum(ch) && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(ch)) {
			return false
		}
	}
	return true
}

// asciiEqualFold compares a field name with a canonical one; field names
// are case-insensitive (RFC 9110 §5.1).
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func isDigit(ch byte) bool { return '0' <= ch && ch <= '9' }
func isAlnum(ch byte) bool {
	return isDigit(ch) || ('a' <= ch && ch <= 'z') || ('A' <= ch && ch <= 'Z')
}
func isHex(ch byte) bool { return isDigit(ch) || ('a' <= ch && ch <= 'f') || ('A' <= ch && ch <= 'F') }

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// parseRetryAfter reads a Retry-After value (RFC 9110 §10.2.3) relative to
// now: delay-seconds (1*DIGIT, the API server's form on 429 and 503) or an
// HTTP-date (§5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms
// a recipient must also accept). 0 when absent, unreadable or in the past.
// More than 9 digits of seconds (31 years) is capped there; any value past
// the 10 s budget makes DeleteSelf give up anyway.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.Trim(v, " \t")
	if allDigits(v) {
		if len(v) > 9 {
			v = "999999999"
		}
		n, _ := strconv.Atoi(v)
		return time.Duration(n) * time.Second
	}
	for _, layout := range [...]string{
		"Mon, 02 Jan 2006 15:04:05 GMT",  // IMF-fixdate
		"Monday, 02-Jan-06 15:04:05 GMT", // RFC 850
		"Mon Jan _2 15:04:05 2006",       // asctime, in UTC by definition
	} {
		if t, err := time.Parse(layout, v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	return 0
}
