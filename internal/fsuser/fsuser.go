// Package fsuser runs file system work as another user without changing
// the process's user and without CAP_CHOWN: on a thread of its own whose
// file-system uid and gid (setfsuid(2), setfsgid(2)) and supplementary
// groups are the job user's, so what it creates belongs to that user from
// birth and every permission check is that user's. PID 1 needs only
// CAP_SETUID and CAP_SETGID for it, which --job-user needs anyway to start
// the job's shells.
//
// Credentials on Linux belong to each thread; the raw system calls used
// here change the calling thread's only. The thread is locked for the
// work and never unlocked, so the Go runtime ends it when the work is
// done and no other goroutine ever runs with the changed credentials; the
// runtime does not clone new threads from a locked one (it asks its
// template thread), so none inherits them either.
package fsuser

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs fn on a fresh thread whose file-system uid and gid are uid and
// gid and that has no supplementary groups, waits for it, and returns its
// error. uid 0 keeps root's file-system identity (and its capabilities),
// with gid as the group of what it creates and as a group root is a
// member of (so root may give its own file to gid without CAP_CHOWN).
// Errors: the credentials could not be set (the process lacks
// CAP_SETUID or CAP_SETGID: fn is not run), or fn's.
func Do(uid, gid int, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		if err := become(uid, gid); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

// become sets the calling thread's supplementary groups (none), fsgid and
// fsuid, in that order (dropping root's fsuid drops the thread's file
// capabilities, so it comes last), and checks each: setfsuid(2) and
// setfsgid(2) report no error, only the previous value, so a call with -1
// (which changes nothing) reads back the one in effect.
func become(uid, gid int) error {
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("fsuser: setgroups: %w (CAP_SETGID)", err)
	}
	_, _ = unix.SetfsgidRetGid(gid)
	if cur, _ := unix.SetfsgidRetGid(-1); cur != gid {
		return fmt.Errorf("fsuser: setfsgid(%d) left the file-system gid at %d (CAP_SETGID)", gid, cur)
	}
	_, _ = unix.SetfsuidRetUid(uid)
	if cur, _ := unix.SetfsuidRetUid(-1); cur != uid {
		return fmt.Errorf("fsuser: setfsuid(%d) left the file-system uid at %d (CAP_SETUID)", uid, cur)
	}
	return nil
}
