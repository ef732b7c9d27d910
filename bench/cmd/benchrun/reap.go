package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// benchReap: metric 4. `init -- orphans watch -n N`: the child starts a
// spawner that makes N zombie children and exits, handing them all to PID
// 1; the child then polls its /proc until none is left.
func benchReap(c *cfg, res *Results) {
	logFile, _ := os.Create(filepath.Join(c.work, "logs", "reap.log"))
	defer logFile.Close()
	row := newRow("reap", "inits", fmt.Sprintf("reaping: %s zombies handed to PID 1 at once → none left", commas(int64(c.reapN))), "ms", true, fmt.Sprintf("%d per init, interleaved", c.reapRuns))
	run := 0
	for rep := 0; rep < c.reapRuns; rep++ {
		for _, in := range c.inits {
			run++
			r, w, err := os.Pipe()
			if err != nil {
				res.errorf("reap", "%v", err)
				return
			}
			p, err := c.startNS(in.plain(run, c.orphans, "watch", "-n", fmt.Sprint(c.reapN)), nil, w, logFile)
			w.Close()
			if err != nil {
				r.Close()
				res.errorf("reap", "%s: %v", in.name, err)
				continue
			}
			lines := make(chan string, 1)
			go func() {
				l, _ := bufio.NewReader(r).ReadString('\n')
				lines <- l
			}()
			var line string
			select {
			case line = <-lines:
			case <-time.After(120 * time.Second):
				res.errorf("reap", "%s: no result within 120 s", in.name)
			}
			if !p.wait(10 * time.Second) {
				p.kill()
			}
			r.Close()
			var o struct {
				Made     int     `json:"made"`
				SpawnMS  float64 `json:"spawn_ms"`
				ReapedMS float64 `json:"reaped_ms"`
				Left     int     `json:"left"`
				Error    string  `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &o); err != nil || o.Error != "" || o.Made != c.reapN {
				res.errorf("reap", "%s run %d: %q (exit %d)", in.name, rep, line, p.exitCode())
				continue
			}
			row.Raw[in.name] = append(row.Raw[in.name], o.ReapedMS)
			row.Raw[in.name+" spawn_ms"] = append(row.Raw[in.name+" spawn_ms"], o.SpawnMS)
		}
	}
	for _, n := range c.initNames {
		if xs := row.Raw[n]; len(xs) > 0 {
			row.set(n, median(xs))
		}
	}
	row.targetVs("", 1.2)
	row.Note = fmt.Sprintf("`init -- orphans watch -n %d` (bench/cmd/orphans): the child starts a spawner that vfork()s %d children which exit at once, then exits itself, so PID 1 inherits %d zombies in one go; t0 = the spawner's CLOCK_MONOTONIC just before it exits; the child polls its /proc every 0.2 ms until only the processes present before are left. Median per init; raw values per run in results.json.", c.reapN, c.reapN, c.reapN)
	res.add(row)
}
