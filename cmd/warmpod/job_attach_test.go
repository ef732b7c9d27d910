package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/warmpod/warmpod/muxproto"
)

// attach says in its Hello that it answers the stream's heartbeat, and
// answers each Ping with a Pong of the same payload (a Ping too long is
// left unanswered); the stream goes on until its stdin ends.
func TestJobAttachAnswersTheHeartbeat(t *testing.T) {
	var in, out bytes.Buffer
	w := muxproto.NewWriter(&in)
	for _, p := range []string{"1", "2", string(make([]byte, muxproto.MaxPing+1)), "3"} {
		require.NoError(t, w.Write(muxproto.TypePing, 0, []byte(p)))
	}
	a := &attacher{exe: "/nonexistent", job: "j1", w: muxproto.NewWriter(&out), calls: map[uint32]*attachCall{}}
	require.Zero(t, a.serve(context.Background(), &in), "the stream's end is attach's")
	r := muxproto.NewReader(&out)
	f, err := r.Read()
	require.NoError(t, err)
	require.Equal(t, muxproto.TypeHello, f.Type)
	var h muxproto.Hello
	require.NoError(t, muxproto.Decode(f, &h))
	assert.True(t, h.Heartbeat)
	assert.Equal(t, muxproto.Version, h.Version, "the wire version is unchanged")
	var pongs []string
	for {
		f, err := r.Read()
		if err != nil {
			break
		}
		require.Equal(t, muxproto.TypePong, f.Type)
		assert.Zero(t, f.Channel)
		pongs = append(pongs, string(f.Payload))
	}
	assert.Equal(t, []string{"1", "2", "3"}, pongs)
}
