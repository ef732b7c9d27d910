// Command orphans hands N zombies to the PID 1 of its PID namespace at once
// and measures how long PID 1 takes to reap them (warmpod bench, metric 4).
//
//	orphans watch -n 10000   run as the init's child: starts `orphans spawn`,
//	                         then polls /proc until only the processes that were
//	                         there before are left; prints one JSON line
//	orphans spawn -n 10000   vfork()s N children that _exit(0) at once (they are
//	                         zombies when vfork returns), never waits for them,
//	                         prints "t0 <CLOCK_MONOTONIC ns>" and exits: the
//	                         kernel re-parents the N zombies to PID 1.
//
// No cgo: the children are made with a raw clone(CLONE_VM|CLONE_VFORK) and
// leave with a raw exit_group before touching the Go runtime (the pattern of
// syscall.forkAndExecInChild).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: orphans watch|spawn -n N")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	n := fs.Int("n", 10000, "number of orphans")
	timeout := fs.Duration("timeout", 60*time.Second, "give up waiting for the reaper after this long")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "spawn":
		os.Exit(spawn(*n))
	case "watch":
		os.Exit(watch(*n, *timeout))
	}
	fmt.Fprintln(os.Stderr, "usage: orphans watch|spawn -n N")
	os.Exit(2)
}

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// vforkExit makes one child that exits at once. With CLONE_VFORK the
// caller is suspended until the child has exited, so the child is a zombie
// when this returns. The child runs on the caller's stack and must not call
// anything that could grow it or enter the runtime.
//
//go:nosplit
func vforkExit() (int, syscall.Errno) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD|syscall.CLONE_VM|syscall.CLONE_VFORK), 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	if r == 0 {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	}
	return int(r), 0
}

func spawn(n int) int {
	const workers = 2
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	var firstErr error
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(share int) {
			defer wg.Done()
			runtime.LockOSThread() // children stay this thread's until we exit
			for i := 0; i < share; i++ {
				var err syscall.Errno
				for try := 0; try < 200; try++ { // EAGAIN under pid pressure: back off, bounded
					if _, err = vforkExit(); err != syscall.EAGAIN {
						break
					}
					time.Sleep(5 * time.Millisecond)
				}
				if err != 0 {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				mu.Lock()
				made++
				mu.Unlock()
			}
		}(n/workers + map[bool]int{true: n % workers, false: 0}[w == 0])
	}
	wg.Wait()
	if firstErr != nil {
		fmt.Fprintf(os.Stderr, "orphans spawn: made %d of %d: %v\n", made, n, firstErr)
	}
	// Everything written before exit: the zombies are re-parented during exit.
	fmt.Printf("t0 %d made %d\n", mono(), made)
	return 0
}

// countProcs counts the numeric entries of /proc (thread-group leaders of
// this PID namespace, zombies included), stopping early once it has seen
// more than limit (a full listing of 10,000 entries takes ~10 ms; a poll
// only needs to know whether anything beyond the baseline is left).
func countProcs(limit int) (int, error) {
	f, err := os.Open("/proc")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	c := 0
	for {
		names, err := f.Readdirnames(128)
		for _, nm := range names {
			if nm != "" && nm[0] >= '0' && nm[0] <= '9' {
				c++
			}
		}
		if c > limit {
			return c, nil
		}
		if err == io.EOF || len(names) == 0 {
			return c, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

type result struct {
	N        int     `json:"n"`
	Made     int     `json:"made"`
	SpawnMS  float64 `json:"spawn_ms"`
	ReapedMS float64 `json:"reaped_ms"`
	Peak     int     `json:"first_poll_left"`
	Left     int     `json:"left"`
	Polls    int     `json:"polls"`
	Error    string  `json:"error,omitempty"`
}

func watch(n int, timeout time.Duration) int {
	out := json.NewEncoder(os.Stdout)
	base, err := countProcs(1 << 30)
	if err != nil {
		_ = out.Encode(result{N: n, Error: err.Error()})
		return 1
	}
	self, _ := os.Executable()
	ts := mono()
	cmd := exec.Command(self, "spawn", "-n", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	pr, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		_ = out.Encode(result{N: n, Error: err.Error()})
		return 1
	}
	line, _ := bufio.NewReader(pr).ReadString('\n')
	_ = cmd.Wait() // reaps only the spawner (by pid)
	var t0 int64
	var made int
	if f := strings.Fields(line); len(f) == 4 && f[0] == "t0" {
		t0, _ = strconv.ParseInt(f[1], 10, 64)
		made, _ = strconv.Atoi(f[3])
	}
	if t0 == 0 {
		_ = out.Encode(result{N: n, Error: "spawner gave no t0: " + strings.TrimSpace(line)})
		return 1
	}
	r := result{N: n, Made: made, SpawnMS: float64(t0-ts) / 1e6}
	deadline := t0 + timeout.Nanoseconds()
	for {
		limit := base
		if r.Polls == 0 {
			limit = 1 << 30 // the first poll counts everything: the peak
		}
		c, err := countProcs(limit)
		if err != nil {
			r.Error = err.Error()
			break
		}
		r.Polls++
		left := c - base
		if left > r.Peak {
			r.Peak = left
		}
		now := mono()
		if left <= 0 {
			r.ReapedMS = float64(now-t0) / 1e6
			break
		}
		if now > deadline {
			r.Left = left
			r.Error = fmt.Sprintf("%d processes still there after %s", left, timeout)
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	_ = out.Encode(r)
	if r.Error != "" {
		return 1
	}
	return 0
}
