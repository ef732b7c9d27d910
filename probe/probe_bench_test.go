package probe_test

import (
	"net/http/httptest"
	"testing"

	"github.com/warmpod/warmpod/probe"
)

// benchHandler has the checks warmpod's main registers, all passing.
func benchHandler() *probe.Handler {
	ok := func() error { return nil }
	live := []probe.Check{{Name: "ping", Fn: ok}, {Name: "supervisor", Fn: ok}, {Name: "reaper", Fn: ok}, {Name: "control-socket", Fn: ok}}
	ready := []probe.Check{{Name: "state", Fn: ok}, {Name: "shell", Fn: ok}}
	return probe.NewHandler(live, ready, func() []byte { return []byte(`{"state":"idle"}`) }, nil)
}

func benchServe(b *testing.B, target string) {
	h := benchHandler()
	req := httptest.NewRequest("GET", target, nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("%s: %d", target, w.Code)
		}
	}
}

func BenchmarkServeLivez(b *testing.B)         { benchServe(b, "/livez") }
func BenchmarkServeReadyz(b *testing.B)        { benchServe(b, "/readyz") }
func BenchmarkServeReadyzVerbose(b *testing.B) { benchServe(b, "/readyz?verbose") }
