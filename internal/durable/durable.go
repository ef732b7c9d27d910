// Package durable makes file system changes survive a crash.
package durable

import "os"

// SyncDir fsyncs the directory dir, so that the entries created, renamed
// or removed in it are on disk (fsync(2) of a file does not cover its
// directory entry). Errors are those of open, fsync and close.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
