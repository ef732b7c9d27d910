package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// benchStartup: metric 3. hyperfine runs `unshare ... init -- true` for
// each init (and unshare alone as the floor); then warmpod's exec →
// /readyz 200.
func benchStartup(c *cfg, res *Results) {
	dir := filepath.Join(c.work, "startup")
	_ = os.MkdirAll(dir, 0o700)
	base := "unshare --pid --fork --mount-proc "
	cmds := []struct{ name, cmd string }{
		{"unshare-only", base + "/bin/true"},
		{"warmpod", base + c.warmpod + " --exit-with-command --probe-addr= --control-socket " + dir + "/c.sock --jobs-dir " + dir + "/jobs -- /bin/true"},
		{"tini", base + c.tini + " -- /bin/true"},
		{"dumb-init", base + c.dumbInit + " /bin/true"},
		{"catatonit", base + c.catatonit + " -- /bin/true"},
	}
	if c.control != "" {
		cmds = append(cmds, struct{ name, cmd string }{"go-min", base + c.control + " /bin/true"})
	}
	// hyperfine runs its commands one after the other; several short
	// rounds interleave them so that load changes hit every init alike.
	rounds := 4
	if c.startupRuns < 20 {
		rounds = 1
	}
	per := max(c.startupRuns/rounds, 2)
	times := map[string][]float64{}
	logFile, _ := os.Create(filepath.Join(c.work, "logs", "hyperfine.log"))
	defer logFile.Close()
	var hfErr error
	for r := 0; r < rounds && hfErr == nil; r++ {
		out := filepath.Join(dir, fmt.Sprintf("hyperfine-%d.json", r))
		args := []string{"-N", "--style", "basic", "--warmup", "3", "--runs", fmt.Sprint(per), "--export-json", out}
		for _, x := range cmds {
			args = append(args, "-n", x.name, x.cmd)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		hf := exec.CommandContext(ctx, "hyperfine", args...)
		hf.Env = cleanEnv()
		hf.Stdout, hf.Stderr = logFile, logFile
		hfErr = hf.Run()
		cancel()
		if hfErr != nil {
			break
		}
		var hj struct {
			Results []struct {
				Command string    `json:"command"`
				Times   []float64 `json:"times"`
			} `json:"results"`
		}
		b, _ := os.ReadFile(out)
		if err := json.Unmarshal(b, &hj); err != nil {
			hfErr = fmt.Errorf("hyperfine json: %v", err)
			break
		}
		for _, x := range hj.Results {
			for _, t := range x.Times {
				times[x.Command] = append(times[x.Command], t*1000)
			}
		}
	}
	row := newRow("startup", "inits", "start-up `init -- true` in a new PID namespace (hyperfine)", "ms", true, fmt.Sprintf("%d per init (%d rounds of %d, +3 warm-up each)", rounds*per, rounds, per))
	if hfErr != nil {
		b, _ := os.ReadFile(filepath.Join(c.work, "logs", "hyperfine.log"))
		res.errorf("startup", "hyperfine: %v: %s", hfErr, tail(string(b), 800))
	} else {
		floor := median(times["unshare-only"])
		row.Raw["unshare-only"] = times["unshare-only"]
		for _, n := range c.initNames {
			if xs := times[n]; len(xs) > 0 {
				row.set(n, median(xs))
				row.Raw[n] = xs
			}
		}
		row.targetVs("tini", 2)
		row.Note = fmt.Sprintf("`hyperfine -N` of `unshare --pid --fork --mount-proc INIT -- /bin/true` (warmpod: `--exit-with-command --probe-addr= --control-socket …`), %d rounds of %d runs per command so the inits interleave; median wall time over all runs. `unshare … /bin/true` alone: %.2f ms median (the floor every init pays).", rounds, per, floor)
		res.add(row)
	}
	benchReady(c, res)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// benchReady: warmpod (warm mode, PID 1 of a new namespace) from starting
// unshare to the first 200 on /readyz.
func benchReady(c *cfg, res *Results) {
	dir := filepath.Join(c.work, "ready")
	_ = os.MkdirAll(dir, 0o700)
	logFile, _ := os.Create(filepath.Join(c.work, "logs", "ready.log"))
	defer logFile.Close()
	cl := &http.Client{Timeout: 200 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	var lat []float64
	for i := 0; i < c.readyRuns; i++ {
		port := freePort()
		url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
		argv := []string{c.warmpod, "--idle-timeout", "0", "--probe-addr", fmt.Sprintf("127.0.0.1:%d", port), "--control-socket", dir + "/c.sock", "--jobs-dir", dir + "/jobs", "--", "/bin/sh"}
		r, w, err := os.Pipe()
		if err != nil {
			res.errorf("ready", "%v", err)
			return
		}
		t0 := time.Now()
		p, err := c.startNS(argv, r, nil, logFile)
		r.Close()
		if err != nil {
			w.Close()
			res.errorf("ready", "%v", err)
			return
		}
		ok := false
		for time.Since(t0) < 10*time.Second {
			resp, err := cl.Get(url)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
					ok = true
					break
				}
			}
			time.Sleep(500 * time.Microsecond)
		}
		w.Close()
		p.kill()
		if !ok {
			res.errorf("ready", "run %d: no /readyz 200 within 10 s", i)
		}
	}
	row := newRow("exec_to_ready", "warmpod", "start → /readyz 200 (warm mode, new PID namespace)", "ms", true, fmt.Sprintf("%d", len(lat)))
	row.set("warmpod", median(lat))
	row.Cells = map[string]string{"warmpod": fmt.Sprintf("%s (p90 %s)", fmtVal(median(lat), "ms"), fmtVal(pct(lat, 90), "ms"))}
	row.Raw["warmpod"] = lat
	row.Note = "from starting `unshare --pid --fork --mount-proc warmpod --idle-timeout 0 --probe-addr 127.0.0.1:PORT … -- /bin/sh` to the first 200 of GET /readyz, polled every 0.5 ms with fresh connections; includes unshare's own cost (see the start-up row)."
	res.add(row)
}
