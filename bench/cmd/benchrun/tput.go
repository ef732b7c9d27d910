package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// benchTput: metric 6. Base64 text lines through `init -- sh -c cat`:
// warmpod --stdio pipe (it moves stdin into a pipe it owns, with splice(2)), warmpod
// --stdio pty (its own inner pty, cooked: echo and \n → \r\n, so more bytes
// come out than go in) and the anchors (which pass the fds through).
func benchTput(c *cfg, res *Results) {
	logFile, _ := os.Create(filepath.Join(c.work, "logs", "tput.log"))
	defer logFile.Close()
	chunk := textChunk()
	type mode struct {
		name  string
		argv  func(run int) []string
		bytes int64
	}
	wpArgs := func(run int, stdio string) []string {
		d := filepath.Join(c.work, "wp", fmt.Sprint(run%4))
		return []string{c.warmpod, "--stdio", stdio, "--exit-with-command", "--probe-addr=", "--control-socket", d + "/c.sock", "--jobs-dir", d + "/jobs", "--", "/bin/sh", "-c", "cat"}
	}
	modes := []mode{
		{"warmpod", func(run int) []string { return wpArgs(run, "pipe") }, c.pipeBytes},
		{"warmpod-pty", func(run int) []string { return wpArgs(run, "pty") }, c.ptyBytes},
		// The least a pty relay can do (bench/cmd/ptyrelay, not an init):
		// what the kernel's line discipline allows here.
		{"ptyrelay", func(int) []string { return []string{c.ptyrelay, "/bin/sh", "-c", "cat"} }, c.ptyBytes},
	}
	for _, in := range c.inits[1:] {
		in := in
		modes = append(modes, mode{in.name, func(run int) []string { return in.plain(run, "/bin/sh", "-c", "cat") }, c.pipeBytes})
	}
	mbps := map[string][]float64{}
	peak := map[string][]float64{}
	outRatio := map[string][]float64{}
	run := 0
	for rep := 0; rep < c.tputRuns; rep++ {
		for _, m := range modes {
			run++
			v, outBytes, pk, err := c.tputOnce(m.argv(run), chunk, m.bytes, logFile)
			if err != nil {
				res.errorf("tput", "%s run %d: %v", m.name, rep, err)
				continue
			}
			mbps[m.name] = append(mbps[m.name], v)
			peak[m.name] = append(peak[m.name], pk)
			outRatio[m.name] = append(outRatio[m.name], float64(outBytes)/float64(roundChunks(m.bytes, len(chunk))))
		}
	}
	pipe := newRow("tput_pipe", "inits", fmt.Sprintf("stdin → `sh -c cat` → stdout, %d MiB, pipe", c.pipeBytes>>20), "MB/s", false, fmt.Sprintf("%d per init, interleaved", c.tputRuns))
	for _, n := range c.initNames {
		if xs := mbps[n]; len(xs) > 0 {
			pipe.set(n, median(xs))
			pipe.Raw[n] = xs
		}
	}
	pipe.targetVs("tini", 0.8)
	pipe.Note = fmt.Sprintf("the host writes base64 lines (76 chars + \\n) in ~1 MiB writes into a pipe that is PID 1's stdin and reads PID 1's stdout pipe; t0 after a first line came back, t1 at stdout EOF; MB/s = input bytes / (t1−t0) / 10^6. warmpod `--stdio pipe --exit-with-command` moves stdin into its own pipe to the shell (splice(2) between the two pipes; stdout passes through); the anchors hand both fds to the child untouched. Output bytes / input bytes: %s.", ratiosString(outRatio, c.initNames))
	res.add(pipe)
	pk := newRow("tput_peak_rss", "inits", fmt.Sprintf("peak PID-1 VmRSS during the %d MiB pipe transfer", c.pipeBytes>>20), "KiB", true, pipe.Runs)
	for _, n := range c.initNames {
		if xs := peak[n]; len(xs) > 0 {
			pk.set(n, median(xs))
			pk.Raw[n] = xs
		}
	}
	pk.Note = "VmRSS of PID 1 sampled every 20 ms during the pipe runs above (host /proc of the verified namespace PID 1), maximum per run, median over runs."
	res.add(pk)

	pty := newRow("tput_pty", "warmpod", fmt.Sprintf("stdin → `sh -c cat` → stdout, %d MiB, warmpod `--stdio pty`", c.ptyBytes>>20), "MB/s", false, fmt.Sprintf("%d, interleaved with the pipe runs", c.tputRuns))
	pty.RefName = "tini"
	if xs := mbps["warmpod-pty"]; len(xs) > 0 {
		pty.set("warmpod", median(xs))
		pty.Raw["warmpod"] = xs
	}
	if t, ok := pipe.Values["tini"]; ok {
		pty.set("tini", t)
	}
	scriptNote := ""
	if xs := mbps["ptyrelay"]; len(xs) > 0 {
		pty.Raw["ptyrelay"] = xs
		scriptNote = fmt.Sprintf(" For scale, bench/cmd/ptyrelay (the minimal relay: creack/pty, two io.Copy, same cooked pty, same data, not in a namespace) does %s MB/s here", fmtVal(median(xs), "MB/s"))
		if w, ok := pty.Values["warmpod"]; ok {
			scriptNote += fmt.Sprintf(": warmpod/ptyrelay = %.2f×", w/median(xs))
		}
		scriptNote += "."
	}
	pty.targetVs("tini", 0.5)
	pty.Note = fmt.Sprintf("as the pipe row, with `--stdio pty`: warmpod opens its own pty for the shell while its own stdin/stdout stay pipes; the inner pty is cooked (echo on, \\n → \\r\\n), so the output is the echo plus cat's copy (output/input bytes: %s); MB/s counts input consumed. Reference: tini's pass-through pipe figure from the pipe row.%s", ratiosString(outRatio, []string{"warmpod-pty", "ptyrelay"}), scriptNote)
	res.add(pty)
}

func ratiosString(m map[string][]float64, names []string) string {
	s := ""
	for _, n := range names {
		if xs := m[n]; len(xs) > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%s %.3f", n, median(xs))
		}
	}
	return s
}

// textChunk is ~1 MiB of base64 lines (76 characters and a newline).
func textChunk() []byte {
	raw := make([]byte, 57*13617) // 57 bytes → 76 base64 chars
	_, _ = rand.Read(raw)
	out := make([]byte, 0, 77*13617)
	for i := 0; i < len(raw); i += 57 {
		out = base64.StdEncoding.AppendEncode(out, raw[i:i+57])
		out = append(out, '\n')
	}
	return out
}

func roundChunks(total int64, chunk int) int64 {
	n := total / int64(chunk)
	if n < 1 {
		n = 1
	}
	return n * int64(chunk)
}

// tputOnce pushes total bytes (whole chunks) through argv and returns MB/s
// of input consumed and the number of output bytes.
func (c *cfg) tputOnce(argv []string, chunk []byte, total int64, logFile *os.File) (mbps float64, outN int64, peakKiB float64, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return 0, 0, 0, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return 0, 0, 0, err
	}
	defer outR.Close()
	start := c.startNS
	if strings.HasSuffix(argv[0], "/ptyrelay") {
		start = c.startProc // a reference relay, not an init
	}
	p, err := start(argv, inR, outW, logFile)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		return 0, 0, 0, err
	}
	defer func() {
		if !p.wait(10 * time.Second) {
			p.kill()
		}
	}()
	// Peak RSS of PID 1 (a namespace's PID 1 only; not for a reference relay).
	stopPeak := make(chan struct{})
	peakCh := make(chan float64, 1)
	go func() {
		pk := 0.0
		pid := 0
		if !strings.HasSuffix(argv[0], "/ptyrelay") {
			pid, _ = p.pid1(5 * time.Second)
		}
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for {
			if pid > 0 {
				if rss, _, err := procMem(pid); err == nil && rss > pk {
					pk = rss
				}
			}
			select {
			case <-stopPeak:
				peakCh <- pk
				return
			case <-tk.C:
			}
		}
	}()
	defer func() {
		select {
		case <-stopPeak:
		default:
			close(stopPeak)
		}
	}()
	warm := []byte("warmup-line\n")
	seen := make(chan struct{})
	done := make(chan struct{})
	var outBytes atomic.Int64
	var tEnd time.Time
	go func() {
		buf := make([]byte, 1<<20)
		signalled := false
		for {
			n, err := outR.Read(buf)
			tot := outBytes.Add(int64(n))
			if !signalled && tot >= int64(len(warm)) {
				signalled = true
				close(seen)
			}
			if err != nil {
				tEnd = time.Now()
				if !signalled {
					close(seen)
				}
				close(done)
				return
			}
		}
	}()
	if _, err := inW.Write(warm); err != nil {
		inW.Close()
		return 0, 0, 0, err
	}
	select {
	case <-seen:
	case <-time.After(10 * time.Second):
		inW.Close()
		p.kill()
		return 0, 0, 0, fmt.Errorf("first line did not come back within 10 s")
	}
	warmOut := outBytes.Load()
	n := roundChunks(total, len(chunk)) / int64(len(chunk))
	deadline := time.Now().Add(3 * time.Minute)
	t0 := time.Now()
	wErr := make(chan error, 1)
	go func() {
		for i := int64(0); i < n; i++ {
			if _, err := inW.Write(chunk); err != nil {
				inW.Close()
				wErr <- err
				return
			}
		}
		wErr <- inW.Close()
	}()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		p.kill()
		<-done
		return 0, 0, 0, fmt.Errorf("not finished within 3 min")
	}
	if err := <-wErr; err != nil {
		return 0, 0, 0, fmt.Errorf("write: %v", err)
	}
	secs := tEnd.Sub(t0).Seconds()
	got := outBytes.Load() - warmOut
	if got < n*int64(len(chunk)) {
		return 0, got, 0, fmt.Errorf("only %d of %d bytes came back", got, n*int64(len(chunk)))
	}
	close(stopPeak)
	return float64(n*int64(len(chunk))) / secs / 1e6, outBytes.Load(), <-peakCh, nil
}
