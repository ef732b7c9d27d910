package podapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/warmpod/warmpod/internal/initlog"
	"github.com/warmpod/warmpod/internal/jsondec"
	"github.com/warmpod/warmpod/internal/jsonenc"
)

// Result is the outcome of DeleteSelf, a short word fit for logs and the
// termination message.
type Result string

// The outcomes of DeleteSelf, from the API server's answer to
// DELETE /api/v1/namespaces/{ns}/pods/{name} (DeleteOptions API reference).
const (
	// Deleted: 200 or 202. The pod object has a deletionTimestamp; the kubelet
	// will stop the container (SIGTERM to PID 1, SIGKILL after the pod's
	// terminationGracePeriodSeconds). The SIGTERM may arrive before the
	// response is read.
	Deleted Result = "deleted"
	// AlreadyGone: 404. Nothing left to delete (someone else deleted it).
	AlreadyGone Result = "already-gone"
	// NotOurPod: 409. preconditions.uid did not match: the name belongs to a
	// different pod now. Never retried.
	NotOurPod Result = "not-our-pod"
	// Forbidden: 403. The service account lacks the RBAC rule `delete` on
	// `pods` in the pod's namespace; logged at error level. Not retried; with
	// restartPolicy Never the pod ends Succeeded when PID 1 exits 0 and stays
	// until the executor deletes it.
	Forbidden Result = "forbidden"
	// Failed: anything else: 401 twice, 429/5xx/network errors on every try,
	// an untrusted server certificate, an unreadable token or CA, any other
	// status.
	Failed Result = "failed"
)

const (
	maxTries    = 3                // per DeleteSelf call, all causes together
	retryBudget = 10 * time.Second // all tries and waits of one call
	tryTimeout  = 5 * time.Second  // one try: connect, TLS, request and answer
)

// backoff[i] is the wait before try i+2 (try 1 starts at once).
var backoff = [...]time.Duration{1 * time.Second, 3 * time.Second}

// DeleteSelf deletes the pod c.Pod through the API server at c.Host, with
// the pod's UID as a precondition so a new pod of the same name (a
// StatefulSet's, or a recreated one) is never deleted by mistake:
//
//	DELETE {Host}/api/v1/namespaces/{ns}/pods/{name}
//	Content-Type: application/json, Accept: application/json,
//	Authorization: Bearer <content of TokenFile, trimmed, read before each try>
//	{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"<uid>"},"propagationPolicy":"Background"}
//
// as one HTTP/1.1 request on its own connection (the exact bytes are in
// buildRequest's comment; namespace and name are percent-encoded path
// segments), over TLS verified against CAFile (see Config.Dial), 5 s per try
// for connect, handshake, request and answer together.
//
// gracePeriodSeconds is never sent (the pod's own terminationGracePeriodSeconds
// applies; 0 would remove the object before the container is dead).
// Background propagation lets the garbage collector delete the Secrets and
// ConfigMaps that carry an ownerReference to the pod once it is gone.
//
// Answers: 200/202 → Deleted; 404 → AlreadyGone; 409 → NotOurPod (uid
// precondition failed; stop); 401 → the token file is read again and the
// request retried once; 403 → Forbidden, with an error-level log line naming
// the missing RBAC rule (`delete` on `pods` in namespace <ns> for the pod's
// service account); 429, 5xx and network errors → retried, at most 3 tries in
// all within about 10 s (waits of 1 s then 3 s; a Retry-After header is
// honoured when it fits in what is left of the 10 s, otherwise the call gives
// up at once) → Failed. A malformed answer (not HTTP/1.x, header section
// over 16 KiB, bad Content-Length) counts as a network error. A certificate
// that does not verify against CAFile is not retried. Other statuses →
// Failed. Only the status line and headers decide; of the body, at most
// 16 KiB is read, for the message.
//
// Refused before anything is sent (Failed, no retry): a Host that is not
// https://HOST[:PORT], a missing pod name, namespace or uid, an unreadable
// CA file or token file, a token holding a control byte (CR or LF would
// forge header lines).
//
// The error is nil for Deleted and AlreadyGone and describes the cause
// otherwise (the API server's Status message included, the token never).
// ctx bounds the whole call (it is also cut to the 10 s budget); when it
// ends, the try under way stops at once. log may be nil; it receives
// progress only (a retry, the outcome, for a 403 how to grant the rule): the
// error is returned, not logged, for the caller to log once.
func (c Config) DeleteSelf(ctx context.Context, log *initlog.Logger) (Result, error) {
	return c.deleteSelf(ctx, log, tryTimeout)
}

// deleteSelf is DeleteSelf with the time per try as a parameter: tests
// shorten it to see a silent server time out without waiting 5 s.
func (c Config) deleteSelf(ctx context.Context, log *initlog.Logger, perTry time.Duration) (Result, error) {
	if log == nil {
		log = initlog.Discard()
	}
	log = log.With("pod", c.Pod.Namespace+"/"+c.Pod.Name, "uid", c.Pod.UID)
	d, err := c.newDeletion(perTry)
	if err != nil {
		return Failed, err
	}
	ctx, cancel := context.WithTimeout(ctx, retryBudget)
	defer cancel()
	return d.run(ctx, log)
}

// deletion is one DeleteSelf call with its inputs checked and resolved
// before the first try, so that a try only reads the token and talks.
type deletion struct {
	c      Config // Dial and Sleep never nil
	ep     endpoint
	path   string // the pod's URL path, segments percent-encoded
	body   []byte // the DeleteOptions JSON, the same on every try
	perTry time.Duration
}

// newDeletion checks c and fills in the defaults of Dial and Sleep. Its
// errors are the refusals before anything is sent: no retry could change
// them.
func (c Config) newDeletion(perTry time.Duration) (*deletion, error) {
	p := c.Pod
	if p.Name == "" || p.Namespace == "" || p.UID == "" {
		return nil, errors.New("self-deletion: pod name, namespace and uid are all required (downward API POD_NAME, POD_NAMESPACE, POD_UID)")
	}
	ep, err := parseHost(c.Host)
	if err != nil {
		return nil, err
	}
	path, err := podPath(p)
	if err != nil {
		return nil, err
	}
	if c.Dial == nil {
		if c.Dial, err = defaultDial(c.CAFile, ep, perTry); err != nil {
			return nil, err
		}
	}
	if c.Sleep == nil {
		c.Sleep = realSleep
	}
	body := deleteOptions(p.UID)
	return &deletion{c: c, ep: ep, path: path, body: body, perTry: perTry}, nil
}

// defaultDial is the production Config.Dial: TLS over TCP to ep's IP
// address, the server's certificate verified against caFile only.
func defaultDial(caFile string, ep endpoint, perTry time.Duration) (func(context.Context) (net.Conn, error), error) {
	if !ep.ip.IsValid() {
		// KUBERNETES_SERVICE_HOST is the kubernetes Service's cluster IP
		// in every cluster; a name would need the resolver, which PID 1
		// leaves out (internal/sockdial). Not retried: it cannot change.
		return nil, fmt.Errorf("self-deletion: API server host %q is a name: PID 1 dials the API server by IP address only (KUBERNETES_SERVICE_HOST)", ep.serverName)
	}
	pool, err := caPool(caFile)
	if err != nil {
		return nil, err
	}
	return tlsDial(pool, ep, perTry), nil
}

// verdict is what one try means for the call: either its end (done, with
// the call's result and error), or another try after wait, err saying why
// this one failed.
type verdict struct {
	done bool
	res  Result
	err  error
	wait time.Duration
}

// run makes the tries, within ctx (already cut to retryBudget). It logs
// progress (a retry, the outcome, the 403 remedy) but returns failures
// without logging them: the caller logs the error once.
func (d *deletion) run(ctx context.Context, log *initlog.Logger) (Result, error) {
	authRetried := false
	for try := 1; ; try++ {
		v := d.try(ctx, log, try, &authRetried)
		if v.done {
			return v.res, v.err
		}
		if err := d.pause(ctx, log, try, v.wait, v.err); err != nil {
			return Failed, err
		}
	}
}

// try sends the request once, with the token read again (the kubelet
// rotates it), and judges the outcome. *authRetried records the one retry a
// 401 gets.
func (d *deletion) try(ctx context.Context, log *initlog.Logger, try int, authRetried *bool) verdict {
	token, err := readToken(d.c.TokenFile)
	if err != nil {
		return verdict{done: true, res: Failed, err: err}
	}
	req, err := buildRequest(d.ep.authority, d.path, token, d.body)
	if err != nil {
		return verdict{done: true, res: Failed, err: fmt.Errorf("%w (token file %s)", err, d.c.TokenFile)}
	}
	a, err := roundTrip(ctx, d.c.Dial, d.perTry, req)
	if err != nil {
		return d.judgeNetError(ctx, try, err)
	}
	return d.judgeAnswer(log, try, token, answerStatus(a), a.retryAfter, authRetried)
}

// judgeNetError judges a try that got no answer: a certificate that does not
// verify ends the call, as does ctx ending; anything else is retried.
func (d *deletion) judgeNetError(ctx context.Context, try int, err error) verdict {
	if isCertError(err) {
		return verdict{done: true, res: Failed, err: fmt.Errorf("self-deletion: API server certificate not trusted by %s: %w", d.c.CAFile, err)}
	}
	err = fmt.Errorf("self-deletion: try %d: %w", try, err)
	if ctx.Err() != nil {
		// The budget or the caller's ctx ended the try: say so, and let
		// errors.Is see context.Canceled or DeadlineExceeded.
		return verdict{done: true, res: Failed, err: fmt.Errorf("%w: %w", err, context.Cause(ctx))}
	}
	return verdict{err: err, wait: backoffFor(try)}
}

// judgeAnswer maps the API server's status to the call's outcome (see
// DeleteSelf); retryAfter is the answer's Retry-After value and token the
// one sent, for naming the service account of a 403.
func (d *deletion) judgeAnswer(log *initlog.Logger, try int, token string, st status, retryAfter string, authRetried *bool) verdict {
	p := d.c.Pod
	switch {
	case st.code == 200 || st.code == 202:
		log.Info("pod deletion accepted; the kubelet will stop this container", "status", st.code, "tries", try)
		return verdict{done: true, res: Deleted}
	case st.code == 404:
		log.Info("pod already gone", "tries", try)
		return verdict{done: true, res: AlreadyGone}
	case st.code == 409:
		err := fmt.Errorf("self-deletion: uid precondition failed, the pod named %s/%s is not this one (409): %s", p.Namespace, p.Name, st.message)
		return verdict{done: true, res: NotOurPod, err: err}
	case st.code == 403:
		rule := fmt.Sprintf("`delete` on `pods` (apiGroup core) in namespace %s for %s", p.Namespace, serviceAccountOf(token))
		// The remedy is in this line only: the error names the rule, not
		// how to grant it.
		log.Error("self-deletion forbidden (403): missing RBAC rule: "+rule+
			"; grant it with a Role and RoleBinding (deploy/rbac.yaml) or let the executor delete finished pods; exiting without deleting the pod",
			"api_message", st.message)
		err := fmt.Errorf("self-deletion forbidden (403): missing RBAC rule: %s: %s", rule, st.message)
		return verdict{done: true, res: Forbidden, err: err}
	case st.code == 401 && !*authRetried:
		*authRetried = true
		log.Warn("token rejected; reading the token file again and retrying once", "tries", try)
		return verdict{err: fmt.Errorf("self-deletion: try %d: 401 Unauthorized: %s", try, st.message)}
	case st.code == 401:
		return verdict{done: true, res: Failed, err: fmt.Errorf("self-deletion: token rejected twice (401): %s", st.message)}
	case st.code == 429 || st.code >= 500:
		err := fmt.Errorf("self-deletion: try %d: status %d: %s", try, st.code, st.message)
		return verdict{err: err, wait: max(backoffFor(try), parseRetryAfter(retryAfter, time.Now()))}
	default:
		return verdict{done: true, res: Failed, err: fmt.Errorf("self-deletion: unexpected status %d: %s", st.code, st.message)}
	}
}

// pause decides whether another try may follow try, which failed with err
// and asks to wait first: not after maxTries, not past the budget (ctx's
// deadline). It logs the retry and waits; a non-nil error is the call's
// (err with the reason to stop), and there is no next try.
func (d *deletion) pause(ctx context.Context, log *initlog.Logger, try int, wait time.Duration, err error) error {
	if try >= maxTries {
		return err
	}
	deadline, _ := ctx.Deadline()
	if left := time.Until(deadline); wait >= left {
		return fmt.Errorf("%w; next try in %s would exceed the %s budget", err, wait, retryBudget)
	}
	log.Warn("self-deletion failed; retrying", "tries", try, "wait", wait, "error", err)
	if wait > 0 {
		if serr := d.c.Sleep(ctx, wait); serr != nil {
			return fmt.Errorf("%w; stopped waiting: %w", err, serr)
		}
	}
	return nil
}

// answerStatus is the status and message of an answer, the message saying
// when the body could not be read to its end.
func answerStatus(a answer) status {
	st := status{code: a.code, message: statusMessage(a.body)}
	if a.bodyErr != nil {
		st.message += fmt.Sprintf(" (answer body unreadable after %d bytes: %v)", len(a.body), a.bodyErr)
	}
	return st
}

// deleteOptions is the DELETE's body: a metav1.DeleteOptions with the
// pod's UID as precondition (the pod deleted is this one, not a successor
// of the same name) and background propagation, as encoding/json wrote
// it (delete_test.go compares).
func deleteOptions(uid string) []byte {
	b := []byte(`{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":`)
	b = jsonenc.AppendString(b, uid)
	return append(b, `},"propagationPolicy":"Background"}`...)
}

type status struct {
	code    int
	message string // metav1.Status message, or the start of the body
}

func backoffFor(try int) time.Duration {
	if try-1 < len(backoff) {
		return backoff[try-1]
	}
	return backoff[len(backoff)-1]
}

func realSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// caPool reads the PEM bundle the API server's certificate must chain to
// (client-go's InClusterConfig: the service account's ca.crt). An
// unreadable file, or one without a PEM certificate, is an error.
func caPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("self-deletion: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("self-deletion: CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("self-deletion: token file: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("self-deletion: token file %s is empty", path)
	}
	return t, nil
}

// statusMessage extracts metav1.Status.message from an API answer, or a
// printable start of the body.
func statusMessage(raw []byte) string {
	// jsondec, not encoding/json's decoder: PID 1's size (issue 30). The
	// reason member is decoded for its type only: a body whose reason is
	// not a string is not a Status, as with encoding/json before.
	var message, reason string
	if jsondec.Unmarshal(raw, jsondec.Member("message", &message),
		jsondec.Member("reason", &reason)) == nil && message != "" {
		return message
	}
	m := strings.TrimSpace(string(raw))
	if len(m) > 200 {
		m = m[:200] + "..."
	}
	return strings.ToValidUTF8(m, "?")
}

// isCertError says whether err is the server certificate failing
// verification (unknown authority, wrong host name or IP, expired), which a
// retry cannot fix; crypto/tls wraps the crypto/x509 error in a
// *tls.CertificateVerificationError.
func isCertError(err error) bool {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
	)
	return errors.As(err, &verr) || errors.As(err, &uerr) || errors.As(err, &herr) || errors.As(err, &cerr)
}

// serviceAccountOf names the service account a bound token belongs to, from
// the unverified "sub" claim of the JWT (system:serviceaccount:NS:NAME); the
// claim is not secret, the token is never logged.
func serviceAccountOf(token string) string {
	const fallback = "the pod's service account"
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return fallback
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return fallback
	}
	var sub string
	if jsondec.Unmarshal(payload, jsondec.Member("sub", &sub)) != nil ||
		!strings.HasPrefix(sub, "system:serviceaccount:") {
		return fallback
	}
	f := strings.Split(strings.TrimPrefix(sub, "system:serviceaccount:"), ":")
	if len(f) != 2 {
		return fallback
	}
	return fmt.Sprintf("service account %s (%s)", f[1], sub)
}
