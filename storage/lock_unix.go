//go:build unix

package storage

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on f: waiting for it when wait is
// set, else failing at once (EWOULDBLOCK) when another descriptor holds
// it. The lock belongs to f's open file description, so it excludes
// other descriptors of this process as well as other processes.
func lockFile(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	return syscall.Flock(int(f.Fd()), how)
}

// unlockFile releases lockFile's lock on f.
func unlockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
