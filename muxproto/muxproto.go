// Package muxproto is the wire format of a job's multiplexer: the frames
// that carry many `warmpod job …` calls over one byte stream. The
// executor's per-job multiplexer (executor/mux) speaks it to the pod's
// `warmpod job attach` over one exec stream, and to the executor's own
// short-lived calls over a unix socket. It is the standard library only,
// since PID 1's binary imports it (docs/design/multiplexer.md has the contract).
//
// A frame is a 9-byte header, then its payload:
//
//	type (1 byte) | channel (uint32, big-endian) | length (uint32, big-endian) | payload
//
// A channel is one call: it is opened by an Open frame, carries its stdin
// one way and its stdout and stderr the other, and ends with an Exit
// frame. Channel 0 is the stream's own (Hello, Bye).
package muxproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/warmpod/warmpod/internal/jsondec"
	"github.com/warmpod/warmpod/internal/jsonenc"
)

// Type is a frame's kind.
type Type byte

// The frame types. The comment says who sends it: "host" is the
// multiplexer (or, on the unix socket, the executor call), "pod" is
// `warmpod job attach` (or, on the socket, the multiplexer).
const (
	// Hello (pod, channel 0): JSON [Hello], the first frame of a stream.
	// On the unix socket the client sends it first (JSON [Hello] naming
	// the job and pod it wants) and the multiplexer answers with its own.
	TypeHello Type = 1
	// Open (host): JSON [Open], starts a call on a new channel.
	TypeOpen Type = 2
	// Stdin (host): bytes for the call's stdin.
	TypeStdin Type = 3
	// StdinEOF (host): the call's stdin ends. For `job stage` that means
	// the executor is gone: it stops renewing the job's lease.
	TypeStdinEOF Type = 4
	// Close (host): nobody reads the call's output any more: its client
	// process is stopped (a stage it streams goes on under PID 1).
	TypeClose Type = 5
	// Stdout, Stderr (pod): the call's output, in order per stream.
	TypeStdout Type = 6
	TypeStderr Type = 7
	// Exit (pod): JSON [Exit], the call ended; sent after all its output.
	TypeExit Type = 8
	// Accept (multiplexer, socket only): the call was opened in the pod;
	// from here on its stdin is consumed, and a failure is the stream's,
	// not a refusal.
	TypeAccept Type = 9
	// Bye (either, channel 0): JSON [Bye], the sender ends the stream.
	TypeBye Type = 10
	// Shutdown (client, socket only, channel 0, instead of Open and
	// after a Hello the multiplexer serves): stop the multiplexer (the
	// job's clean-up).
	TypeShutdown Type = 11
	// Request (client, socket only, instead of Open): an API call the
	// multiplexer makes for the job on its own connection to the API
	// server (its payload is the executor's, package executor/mux); the
	// answer is a Stdout frame with the result, then Exit.
	TypeRequest Type = 12
	// Ping (host, channel 0): the stream's heartbeat, sent every few
	// seconds while the stream is open, only to an attach whose Hello
	// says Heartbeat. It is data in the stream, so every hop that times
	// out an idle stream (a load balancer, the container runtime's
	// stream_idle_timeout) sees it, where a WebSocket ping reaches the
	// API server only. Its payload is at most 64 bytes, opaque.
	TypePing Type = 13
	// Pong (pod, channel 0): the answer to a Ping, with its payload, so
	// that bytes cross in both directions.
	TypePong Type = 14
)

// MaxPing bounds a Ping's payload; an attach answers a longer one with
// nothing.
const MaxPing = 64

// String names the frame type as error messages do ("open", "exit";
// "type-N" for a type this version does not know).
func (t Type) String() string {
	names := [...]string{1: "hello", 2: "open", 3: "stdin", 4: "stdin-eof", 5: "close", 6: "stdout",
		7: "stderr", 8: "exit", 9: "accept", 10: "bye", 11: "shutdown", 12: "request", 13: "ping", 14: "pong"}
	if int(t) < len(names) && names[t] != "" {
		return names[t]
	}
	return fmt.Sprintf("type-%d", byte(t))
}

// MaxPayload bounds a frame's payload (1 MiB): a reader refuses a larger
// length before it reads on, and grows a payload only as its bytes
// arrive, so a corrupt or hostile header costs no memory. Writers split data into frames of at most MaxData.
const MaxPayload = 1 << 20

// MaxData is the most stdin or output bytes a writer puts in one frame
// (64 KiB): small enough that one call's output never holds up another
// channel's frames for long.
const MaxData = 64 << 10

// HeaderSize is the size of a frame's header in bytes.
const HeaderSize = 9

// Frame is one decoded frame. Payload is owned by the caller.
type Frame struct {
	Type    Type
	Channel uint32
	Payload []byte
}

// Hello opens a stream. Version is the wire version (1). On a pod stream
// Job is the job attach serves and PID is attach's pid in the pod; on a
// socket the client names the Job and the pod (PodUID) it wants, and the
// multiplexer refuses a mismatch.
//
// Heartbeat (attach only) says attach answers a Ping with a Pong. An
// attach of an older warmpod does not say it and would end the stream on
// a frame type it does not know: the multiplexer sends it no Ping, but an
// empty Stdin frame on channel 0 instead, which every attach ignores (no
// call has channel 0), so its stream is not idle either. The wire version
// stays 1: a Hello without the field is the older attach, and an older
// multiplexer ignores the field.
type Hello struct {
	Version   int    `json:"version"`
	Job       string `json:"job"`
	PodUID    string `json:"pod_uid,omitempty"`
	PID       int    `json:"pid,omitempty"`
	Heartbeat bool   `json:"heartbeat,omitempty"`
}

// Version is this package's wire version.
const Version = 1

// Open starts a call: Argv is what a direct exec would run in the pod
// (`warmpod job …`; Argv[0] is the pod's warmpod path).
type Open struct {
	Argv []string `json:"argv"`
}

// Commands are the `warmpod job` commands a stream carries: what the
// executors run by direct exec. start is one (its token goes on the
// call's stdin, as on a direct exec, never on the executor's disk); not
// attach itself, not env (it prints the job's secrets; no executor needs
// it). exec runs what a direct exec would (the GitHub hook's _work
// unpack), for the job only: the stream spares the executor an exec of
// its own.
var commands = map[string]bool{"start": true, "stage": true, "cancel": true, "status": true, "wait": true,
	"put": true, "end": true, "logs": true, "limits": true, "exec": true}

// Carried tells whether a stream carries argv (ARGV0 job COMMAND …, one
// of the commands above); anything else (a shell, another program) the
// executor runs by direct exec, and `job attach` refuses it.
func Carried(argv []string) bool {
	return len(argv) >= 3 && argv[1] == "job" && commands[argv[2]]
}

// Exit ends a call. Code is its exit status when Error is empty; a
// non-empty Error means the call's fate is unknown (the stream to the pod
// broke, or attach could not start it): the executor treats it as a
// broken exec stream. Refused means the call never started (nothing of
// its stdin was read): the client may run it another way.
type Exit struct {
	Code    int    `json:"code"`
	Error   string `json:"error,omitempty"`
	Refused bool   `json:"refused,omitempty"`
}

// Bye says why a stream ends: "job-ended" (the job is over in the pod),
// "shutdown", "idle", or an error.
type Bye struct {
	Reason string `json:"reason"`
}

// AppendJSON appends h as encoding/json.Marshal writes it.
func (h Hello) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.Int("version", int64(h.Version))
	o.String("job", h.Job)
	o.OmitEmpty("pod_uid", h.PodUID)
	if h.PID != 0 {
		o.Int("pid", int64(h.PID))
	}
	if h.Heartbeat {
		o.Bool("heartbeat", true)
	}
	return o.End()
}

// AppendJSON appends op as encoding/json.Marshal writes it.
func (op Open) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.Strings("argv", op.Argv)
	return o.End()
}

// AppendJSON appends e as encoding/json.Marshal writes it.
func (e Exit) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.Int("code", int64(e.Code))
	o.OmitEmpty("error", e.Error)
	if e.Refused {
		o.Bool("refused", true)
	}
	return o.End()
}

// AppendJSON appends by as encoding/json.Marshal writes it.
func (by Bye) AppendJSON(b []byte) []byte {
	o := jsonenc.NewObject(b)
	o.String("reason", by.Reason)
	return o.End()
}

// ErrTooLarge is returned by Read for a frame whose length exceeds
// MaxPayload.
var ErrTooLarge = errors.New("muxproto: frame payload too large")

// Reader decodes frames from a stream.
type Reader struct{ r *bufio.Reader }

// NewReader returns a Reader of r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 16<<10)} }

// Read returns the next frame. Errors: io.EOF at a clean end between
// frames, io.ErrUnexpectedEOF inside one, ErrTooLarge, or the stream's.
func (r *Reader) Read() (Frame, error) {
	var h [HeaderSize]byte
	if _, err := io.ReadFull(r.r, h[:]); err != nil {
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(h[5:9])
	if n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, n)
	}
	f := Frame{Type: Type(h[0]), Channel: binary.BigEndian.Uint32(h[1:5])}
	if n > 0 {
		// The payload grows as its bytes arrive: a header that claims
		// a megabyte costs nothing until the megabyte comes.
		buf := bytes.NewBuffer(make([]byte, 0, min(n, 4<<10)))
		if _, err := io.CopyN(buf, r.r, int64(n)); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Frame{}, err
		}
		f.Payload = buf.Bytes()
	}
	return f, nil
}

// Writer encodes frames onto a stream; it is safe for concurrent use (one
// frame is written whole before the next).
type Writer struct {
	mu sync.Mutex
	w  io.Writer
}

// NewWriter returns a Writer onto w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// Write sends one frame. Errors: ErrTooLarge, or the stream's.
func (w *Writer) Write(t Type, ch uint32, payload []byte) error {
	if len(payload) > MaxPayload {
		return ErrTooLarge
	}
	buf := make([]byte, HeaderSize+len(payload))
	buf[0] = byte(t)
	binary.BigEndian.PutUint32(buf[1:5], ch)
	binary.BigEndian.PutUint32(buf[5:9], uint32(len(payload)))
	copy(buf[HeaderSize:], payload)
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(buf)
	return err
}

// WriteDoc sends one frame whose payload is v's JSON (its AppendJSON):
// PID 1's frames (Hello, Exit, Bye), written without encoding/json's
// reflection (PID 1's size, issue 30).
func (w *Writer) WriteDoc(t Type, ch uint32, v jsonenc.Appender) error {
	return w.Write(t, ch, v.AppendJSON(nil))
}

// WriteJSON sends one frame whose payload is v as JSON (encoding/json):
// the executor side's frames, of any type. PID 1 calls WriteDoc.
func (w *Writer) WriteJSON(t Type, ch uint32, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return w.Write(t, ch, b)
}

// WriteData sends p as frames of type t of at most MaxData bytes each.
func (w *Writer) WriteData(t Type, ch uint32, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), MaxData)
		if err := w.Write(t, ch, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// DataWriter is an io.Writer that sends what is written to it as frames
// of type t on channel ch.
func (w *Writer) DataWriter(t Type, ch uint32) io.Writer { return dataWriter{w: w, t: t, ch: ch} }

type dataWriter struct {
	w  *Writer
	t  Type
	ch uint32
}

func (d dataWriter) Write(p []byte) (int, error) {
	if err := d.w.WriteData(d.t, d.ch, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Decode unmarshals a frame's JSON payload into v, naming the frame type
// in its error.
func Decode(f Frame, v any) error {
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("muxproto: bad %s frame: %w", f.Type, err)
	}
	return nil
}

// DecodeOpen is Decode for an Open frame, the one frame PID 1's `warmpod
// job attach` reads; it decodes with internal/jsondec, under
// encoding/json's rules, so that PID 1's binary does without encoding/json's
// decoder (issue 30). Errors name the frame type, as Decode's.
func DecodeOpen(f Frame) (Open, error) {
	var o Open
	if err := jsondec.Unmarshal(f.Payload, jsondec.Member("argv", &o.Argv)); err != nil {
		return Open{}, fmt.Errorf("muxproto: bad %s frame: %w", f.Type, err)
	}
	return o, nil
}
