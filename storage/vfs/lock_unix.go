//go:build unix

package vfs

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes a flock(2) on f, shared or exclusive: waiting for it
// when wait is set, else failing at once (EWOULDBLOCK) when another
// descriptor holds a conflicting one. The lock belongs to f's open file
// description, so it excludes other descriptors of this process as well
// as other processes.
func lockFile(f *os.File, shared, wait bool) error {
	how := syscall.LOCK_EX
	if shared {
		how = syscall.LOCK_SH
	}
	if !wait {
		how |= syscall.LOCK_NB
	}
	return syscall.Flock(int(f.Fd()), how)
}

// unlockFile releases lockFile's lock on f.
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// lockBusy reports whether lockFile's error means another holder.
func lockBusy(err error) bool { return errors.Is(err, syscall.EWOULDBLOCK) }
