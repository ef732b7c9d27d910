// Package procscan reads the container's process table from /proc
// (ReadProcs, ReadIO) and answers the questions PID 1 asks of it: which
// processes are not its own (Foreign), which descend from a stage leader
// (Descendants), and whether CPU or I/O use moved (UsageTracker). The
// supervisor counts any foreign, non-zombie process as activity for the
// lease machine (package lease); the scanner knows nothing of leases.
package procscan

import (
	"encoding/binary"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Proc is one process as read from /proc/PID/stat (see proc(5)): fields 1
// (pid), 3 (state), 4 (ppid), 5 (pgrp), 6 (session) and 2 (comm).
type Proc struct {
	// PID, PPID, PGID and SID are the process, parent, process-group and
	// session IDs as seen in the scanned /proc's PID namespace.
	PID, PPID, PGID, SID int
	// State is the one-letter state: 'R', 'S', 'D', 'Z' (zombie), 'T', 't',
	// 'X' (dead), 'I' (idle kernel thread), ...
	State byte
	// Comm is the command name (at most 15 bytes from the kernel), without the
	// surrounding parentheses. It may contain spaces and ')'.
	Comm string
	// CPU is the CPU time the process has used, user plus system (fields
	// 14 and 15), and Start when it started after boot (field 22), both in
	// clock ticks (USER_HZ, 100 per second on Linux). Zero when the stat
	// line stops early.
	CPU, Start uint64
}

// ReadProcs reads every numeric entry of root (normally "/proc") and parses
// root/PID/stat. The comm field may contain spaces and ')', so it is parsed up
// to the LAST ')' in the file. Processes that vanish during the scan (ENOENT,
// ESRCH), that cannot be read (EACCES, EPERM) or whose stat does not parse are
// skipped silently; non-numeric entries are ignored. The error is non-nil only
// when root itself cannot be listed or a stat file fails with another error
// (e.g. EMFILE).
//
// It runs every second in PID 1, so it is allocation-light: the directory is
// read with getdents(2) and each stat file with openat(2)+read(2) into buffers
// reused for the whole scan: about two small allocations per process (the
// path passed to openat and the Comm string).
func ReadProcs(root string) ([]Proc, error) {
	dirfd, err := retryEINTR(func() (int, error) {
		return unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(dirfd)

	var (
		dents = make([]byte, 8192)
		stat  = make([]byte, 1024)
		path  = make([]byte, 0, 32)
		procs = make([]Proc, 0, 64)
	)
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Getdents(dirfd, dents) })
		if err != nil {
			return nil, &os.PathError{Op: "getdents", Path: root, Err: err}
		}
		if n <= 0 {
			return procs, nil
		}
		for b := dents[:n]; len(b) >= direntNameOff; {
			// struct linux_dirent64 { u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[]; }
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < direntNameOff || reclen > len(b) {
				break
			}
			pid, ok := parsePIDName(b[direntNameOff:reclen])
			b = b[reclen:]
			if !ok {
				continue
			}
			path = strconv.AppendInt(path[:0], int64(pid), 10)
			path = append(path, "/stat"...)
			var content []byte
			content, stat, err = readAt(dirfd, string(path), stat)
			if err != nil {
				if vanished(err) {
					continue
				}
				return nil, &os.PathError{Op: "read", Path: root + "/" + string(path), Err: err}
			}
			if p, ok := parseStat(content); ok {
				procs = append(procs, p)
			}
		}
	}
}

// direntNameOff is offsetof(struct linux_dirent64, d_name).
const direntNameOff = 19

// parsePIDName parses a NUL-terminated directory name made only of decimal
// digits into a positive PID.
func parsePIDName(name []byte) (int, bool) {
	pid := 0
	n := 0
	for _, c := range name {
		if c == 0 {
			break
		}
		if c < '0' || c > '9' || n >= 10 {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
		n++
	}
	return pid, n > 0 && pid > 0
}

// readAt reads the whole file at path (relative to dirfd) into buf, growing it
// when the file does not fit. It returns the content and the (possibly grown)
// buffer for reuse.
func readAt(dirfd int, path string, buf []byte) ([]byte, []byte, error) {
	fd, err := retryEINTR(func() (int, error) {
		return unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	})
	if err != nil {
		return nil, buf, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(buf) {
			grown := make([]byte, 2*len(buf))
			copy(grown, buf)
			buf = grown
		}
		m, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf[n:]) })
		if err != nil {
			return nil, buf, err
		}
		if m <= 0 {
			return buf[:n], buf, nil
		}
		n += m
	}
}

// vanished reports errors that mean "this process is gone or not ours to
// read", which ReadProcs skips.
func vanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) ||
		errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) ||
		errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}

// retryEINTR calls f until it does not fail with EINTR.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// parseStat parses the contents of /proc/PID/stat:
//
//	pid (comm) state ppid pgrp session ...
//
// comm runs from the first '(' to the LAST ')', since it may itself contain
// spaces and parentheses.
func parseStat(b []byte) (Proc, bool) {
	var p Proc
	open, end := -1, -1
	for i, c := range b {
		if c == '(' && open < 0 {
			open = i
		}
		if c == ')' {
			end = i
		}
	}
	if open < 0 || end < open {
		return p, false
	}
	pid, rest, ok := nextInt(b[:open])
	if !ok || len(trimSpace(rest)) != 0 {
		return p, false
	}
	rest = b[end+1:]
	if len(rest) < 2 || rest[0] != ' ' {
		return p, false
	}
	p.PID = pid
	p.State = rest[1]
	rest = rest[2:]
	if p.PPID, rest, ok = nextInt(rest); !ok {
		return p, false
	}
	if p.PGID, rest, ok = nextInt(rest); !ok {
		return p, false
	}
	if p.SID, rest, ok = nextInt(rest); !ok {
		return p, false
	}
	p.Comm = string(b[open+1 : end])
	// Fields 7..22; a short line (an old kernel, a test's fake) keeps zeros.
	var f [16]int
	for i := range f {
		if f[i], rest, ok = nextInt(rest); !ok {
			return p, true
		}
	}
	if f[7] >= 0 && f[8] >= 0 && f[15] >= 0 {
		p.CPU, p.Start = uint64(f[7])+uint64(f[8]), uint64(f[15])
	}
	return p, true
}

// ReadIO returns the bytes process pid has read and written through
// system calls so far (rchar + wchar of root/PID/io, proc(5)); false when
// the file cannot be read (the process is gone, or /proc hides it).
func ReadIO(root string, pid int) (uint64, bool) {
	b, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, false
	}
	return parseIO(b)
}

// parseIO sums the rchar and wchar lines of a /proc/PID/io file.
func parseIO(b []byte) (uint64, bool) {
	var sum uint64
	found := 0
	for len(b) > 0 {
		line := b
		if i := indexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		for _, key := range []string{"rchar: ", "wchar: "} {
			if len(line) > len(key) && string(line[:len(key)]) == key {
				v, err := strconv.ParseUint(string(line[len(key):]), 10, 64)
				if err != nil {
					return 0, false
				}
				sum += v
				found++
			}
		}
	}
	if found != 2 {
		return 0, false
	}
	return sum, true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Usage is what one process has consumed so far, as [UsageTracker] compares it
// between scans.
type Usage struct {
	// Start identifies the process together with its PID (a reused PID
	// has another start time), in clock ticks after boot.
	Start uint64
	// CPU is its CPU time in clock ticks; IO its bytes read and written.
	CPU, IO uint64
}

// UsageTracker decides which foreign processes count as activity: one seen for
// the first time (something just started it), or one whose CPU time or
// I/O grew since the previous scan. A process that only sleeps (a
// forgotten `kubectl exec` shell, a `sleep 600`) stops counting after its
// first scan, so it cannot hold an idle pod up forever. The zero value is
// ready to use; it is pure (no clock, no /proc): the caller passes each
// scan's usage.
type UsageTracker struct {
	last map[int]Usage
}

// Update records the usage of the foreign processes of one scan (PID →
// usage; a process missing from cur is forgotten) and tells whether any
// of them was active since the previous scan.
func (b *UsageTracker) Update(cur map[int]Usage) bool {
	active := false
	for pid, u := range cur {
		prev, seen := b.last[pid]
		if !seen || prev.Start != u.Start || u.CPU > prev.CPU || u.IO > prev.IO {
			active = true
		}
	}
	b.last = cur
	return active
}

// nextInt skips leading spaces and parses one optionally negative decimal
// integer, returning it and the remaining bytes.
func nextInt(b []byte) (int, []byte, bool) {
	b = trimSpace(b)
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	n, i := 0, 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i >= 18 {
			return 0, nil, false
		}
		n = n*10 + int(b[i]-'0')
	}
	if i == 0 || (i < len(b) && b[i] != ' ' && b[i] != '\n') {
		return 0, nil, false
	}
	if neg {
		n = -n
	}
	return n, b[i:], true
}

// trimSpace drops leading spaces.
func trimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

// Foreign returns the processes that count as activity: those that are alive
// (State is neither 'Z', zombie, nor 'X', dead) and not excluded by skip. A nil
// skip excludes nothing. The caller's skip typically drops warmpod itself, its
// own helpers and kernel threads; the result aliases no memory of procs.
func Foreign(procs []Proc, skip func(Proc) bool) []Proc {
	var out []Proc
	for _, p := range procs {
		if p.State == 'Z' || p.State == 'X' {
			continue
		}
		if skip != nil && skip(p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Descendants returns the PIDs of all descendants of pid (children,
// grandchildren, ... by PPID chains) in procs, in breadth-first order, not
// including pid itself. Each PID appears once, even if procs is inconsistent
// (a PPID cycle from a racy scan).
func Descendants(procs []Proc, pid int) []int {
	children := make(map[int][]int, len(procs))
	for _, p := range procs {
		if p.PID != p.PPID {
			children[p.PPID] = append(children[p.PPID], p.PID)
		}
	}
	seen := map[int]bool{pid: true}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, c := range children[cur] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}
