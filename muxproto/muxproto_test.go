package muxproto

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*MaxData+7)
	cases := []struct {
		name string
		t    Type
		ch   uint32
		data []byte
	}{
		{"empty", TypeStdinEOF, 3, nil},
		{"small", TypeStdout, 1, []byte("hello\n")},
		{"max channel", TypeStderr, ^uint32(0), []byte{0, 1, 2}},
		{"split", TypeStdin, 9, big},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewWriter(&buf)
			require.NoError(t, w.WriteData(c.t, c.ch, c.data))
			if len(c.data) == 0 {
				require.NoError(t, w.Write(c.t, c.ch, nil))
			}
			r := NewReader(&buf)
			var got []byte
			for {
				f, err := r.Read()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				require.Equal(t, c.t, f.Type)
				require.Equal(t, c.ch, f.Channel)
				require.LessOrEqual(t, len(f.Payload), MaxData)
				got = append(got, f.Payload...)
			}
			require.Equal(t, len(c.data), len(got))
			require.True(t, bytes.Equal(c.data, got))
		})
	}
}

func TestReadRefuses(t *testing.T) {
	hdr := func(n uint32) []byte {
		b := make([]byte, HeaderSize)
		b[0] = byte(TypeStdout)
		binary.BigEndian.PutUint32(b[5:], n)
		return b
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"too large", hdr(MaxPayload + 1), ErrTooLarge},
		{"short header", []byte{1, 2, 3}, io.ErrUnexpectedEOF},
		{"short payload", append(hdr(10), 'a'), io.ErrUnexpectedEOF},
		{"no payload at all", hdr(10), io.ErrUnexpectedEOF},
		{"clean end", nil, io.EOF},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewReader(bytes.NewReader(c.in)).Read()
			require.ErrorIs(t, err, c.want)
		})
	}
	require.ErrorIs(t, NewWriter(io.Discard).Write(TypeStdout, 0, make([]byte, MaxPayload+1)), ErrTooLarge)
}

func TestDecodeNamesTheFrame(t *testing.T) {
	var o Open
	err := Decode(Frame{Type: TypeOpen, Payload: []byte("{")}, &o)
	require.ErrorContains(t, err, "bad open frame")
}

// FuzzReader: any bytes decode to frames or an error, never a panic or an
// allocation beyond MaxPayload, and what decodes re-encodes to the same
// bytes; DecodeOpen agrees with Decode on every frame.
func FuzzReader(f *testing.F) {
	var seed bytes.Buffer
	w := NewWriter(&seed)
	_ = w.WriteJSON(TypeHello, 0, Hello{Version: Version, Job: "j"})
	_ = w.WriteJSON(TypeOpen, 1, Open{Argv: []string{"/w", "job", "status"}})
	_ = w.Write(TypeStdout, 1, []byte("out"))
	f.Add(seed.Bytes())
	f.Add([]byte{8, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		var out bytes.Buffer
		ow := NewWriter(&out)
		for {
			fr, err := r.Read()
			if err != nil {
				break
			}
			if len(fr.Payload) > MaxPayload {
				t.Fatalf("payload of %d bytes", len(fr.Payload))
			}
			if err := ow.Write(fr.Type, fr.Channel, fr.Payload); err != nil {
				t.Fatal(err)
			}
			var v any
			_ = Decode(fr, &v)
			var want Open
			wantErr := Decode(fr, &want)
			got, err := DecodeOpen(fr)
			require.Equal(t, wantErr == nil, err == nil, "DecodeOpen %v, Decode %v", err, wantErr)
			if err == nil {
				require.Equal(t, want, got)
			}
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("re-encoding differs")
		}
	})
}

// TestDecodeOpenAgrees: DecodeOpen fails exactly when Decode into an Open
// (encoding/json) does, decodes the same Argv, and names the frame type.
func TestDecodeOpenAgrees(t *testing.T) {
	tests := []struct {
		name, payload string
	}{
		{"argv", `{"argv":["/warmpod","job","status"]}`},
		{"empty argv", `{"argv":[]}`},
		{"null argv", `{"argv":null}`},
		{"no argv", `{}`},
		{"other members", `{"x":{"argv":1},"ARGV":["a"]}`},
		{"not a list", `{"argv":"a"}`},
		{"not strings", `{"argv":[1]}`},
		{"not an object", `["a"]`},
		{"truncated", `{"argv":["a"`},
		{"empty", ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Frame{Type: TypeOpen, Channel: 1, Payload: []byte(tt.payload)}
			var want Open
			wantErr := Decode(f, &want)
			got, err := DecodeOpen(f)
			if wantErr != nil {
				require.ErrorContains(t, err, "bad open frame")
				return
			}
			require.NoError(t, err)
			require.Equal(t, want, got)
		})
	}
}

// PID 1's frames (WriteDoc, jsonenc) are what the executor's WriteJSON
// (encoding/json) writes for the same values.
func TestFrameDocumentsAreMarshals(t *testing.T) {
	type (
		plainHello Hello
		plainOpen  Open
		plainExit  Exit
		plainBye   Bye
	)
	for _, c := range []struct {
		doc   interface{ AppendJSON([]byte) []byte }
		plain any
	}{
		{Hello{}, plainHello{}},
		{Hello{Version: 1, Job: "j<1>", PodUID: "u", PID: 42, Heartbeat: true}, plainHello{Version: 1, Job: "j<1>", PodUID: "u", PID: 42, Heartbeat: true}},
		{Open{}, plainOpen{}},
		{Open{Argv: []string{"/w", "job", "stage", "a\u2028"}}, plainOpen{Argv: []string{"/w", "job", "stage", "a\u2028"}}},
		{Exit{}, plainExit{}},
		{Exit{Code: -1, Error: "broke & gone", Refused: true}, plainExit{Code: -1, Error: "broke & gone", Refused: true}},
		{Bye{}, plainBye{}},
		{Bye{Reason: "job-ended"}, plainBye{Reason: "job-ended"}},
	} {
		want, err := json.Marshal(c.plain)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(c.doc.AppendJSON(nil)))
	}
}
