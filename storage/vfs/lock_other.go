//go:build !unix && !windows

package vfs

import (
	"errors"
	"os"
)

// errNoLock is lockFile's error where Spur knows no file lock (plan9,
// js/wasm): writes refuse to run unguarded.
var errNoLock = errors.New("vfs: no file locking on this platform")

// lockFile fails: there is no lock to take here.
func lockFile(f *os.File, shared, wait bool) error { return errNoLock }

// unlockFile has nothing to release.
func unlockFile(f *os.File) error { return nil }

// lockBusy reports whether lockFile's error means another holder: never
// here.
func lockBusy(err error) bool { return false }
