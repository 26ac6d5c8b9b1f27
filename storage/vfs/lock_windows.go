//go:build windows

package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockFile takes a LockFileEx lock on the first byte of f, shared or
// exclusive: waiting for it when wait is set, else failing at once when
// another handle holds a conflicting one. Like flock(2) on Unix it belongs
// to f's handle, so it excludes other handles of this process as well as
// other processes.
func lockFile(f *os.File, shared, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if shared {
		flags = 0
	}
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, lockRegion())
}

// lockRegion is the byte LockFileEx locks: far past the end of the file,
// so that reading the holder written in the file is not blocked (Windows
// locks are mandatory for the locked bytes).
func lockRegion() *windows.Overlapped { return &windows.Overlapped{OffsetHigh: 0x40000000} }

// unlockFile releases lockFile's lock on f.
func unlockFile(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, lockRegion())
}

// lockBusy reports whether lockFile's error means another holder.
func lockBusy(err error) bool {
	return errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING)
}
