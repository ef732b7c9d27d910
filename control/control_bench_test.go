package control_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/warmpod/warmpod/control"
	"github.com/warmpod/warmpod/internal/initlog"
)

// BenchmarkCallRoundTrip is one client call (dial, SO_PEERCRED check,
// request line, handler, response line) over a real unix socket with a
// trivial handler: the fixed cost of every `warmpod job|probe|status`.
func BenchmarkCallRoundTrip(b *testing.B) {
	path := filepath.Join(b.TempDir(), "c.sock")
	srv, err := control.Listen(path, func(context.Context, control.Peer, *control.Request) control.Response {
		return control.Response{OK: true, State: "idle"}
	}, initlog.Discard())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx); close(done) }()
	defer func() { cancel(); _ = srv.Close(); <-done }()
	req := &control.Request{Op: control.OpStatus}
	b.ReportAllocs()
	for b.Loop() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := control.Call(cctx, path, req)
		ccancel()
		if err != nil || !resp.OK {
			b.Fatalf("call: %v %+v", err, resp)
		}
	}
}
