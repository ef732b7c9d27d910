package shellproxy

import (
	"io"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkPump measures stdin → shell-pipe throughput through the pump
// (bytes per second, via SetBytes: one op is 1 MiB written to stdin and
// read back from the shell's end), the way PID 1 runs it: stdin is a
// blocking pipe outside Go's poller, the target is the pipe stdinPipe
// makes, and a reader drains the shell's end like `cat` would.
//
//   - copy: stdin hidden behind a plain io.Reader, so the pump can only read
//     into user space and write again (the path before splice).
//   - file: stdin passed as the *os.File PID 1 has (the splice path where
//     the kernel allows it).
func BenchmarkPump(b *testing.B) {
	for _, bc := range []struct {
		name string
		wrap func(*os.File) io.Reader
	}{
		{"copy", func(f *os.File) io.Reader { return struct{ io.Reader }{f} }},
		{"file", func(f *os.File) io.Reader { return f }},
	} {
		b.Run(bc.name, func(b *testing.B) { benchPump(b, bc.wrap) })
	}
}

func benchPump(b *testing.B, wrap func(*os.File) io.Reader) {
	const op = 1 << 20 // bytes written per op
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		b.Fatal(err)
	}
	// Blocking descriptors, as the container runtime hands PID 1 its stdin.
	src := os.NewFile(uintptr(fds[0]), "stdin")
	feed := os.NewFile(uintptr(fds[1]), "stdin-writer")
	r, w, err := stdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	p := newPump(false)
	readerDone := make(chan struct{})
	go func() { p.readFrom(wrap(src)); close(readerDone) }()
	go p.run()
	p.attach(w, 0)

	total := int64(b.N) * op
	drained := make(chan int64, 1)
	go func() {
		buf := make([]byte, 128<<10)
		var got int64
		for got < total {
			n, err := r.Read(buf)
			got += int64(n)
			if err != nil {
				break
			}
		}
		drained <- got
	}()
	chunk := make([]byte, op)
	for i := range chunk {
		chunk[i] = byte('a' + i%26)
	}
	b.SetBytes(op)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := feed.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if got := <-drained; got != total {
		b.Fatalf("drained %d bytes, want %d", got, total)
	}
	b.StopTimer()
	_ = feed.Close()
	<-readerDone
	p.detach()
	p.close()
	closeAll(w, r, src)
}
