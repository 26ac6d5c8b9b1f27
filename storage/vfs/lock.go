package vfs

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
)

// ErrLocked is matched (errors.Is) by the error of FS.Lock when another
// holder has a conflicting lock.
var ErrLocked = errors.New("locked")

// LockedError is the error of FS.Lock when the lock is held: Name is the
// lock file, Holder the description its exclusive holder gave ("spur
// serve (pid 1234)"), or "" when unknown (a shared holder, or a holder
// that has not written it yet).
type LockedError struct {
	Name   string
	Holder string
}

// Error says who holds the lock.
func (e *LockedError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("%s is locked by another process", e.Name)
	}
	return fmt.Sprintf("%s is locked by %s", e.Name, e.Holder)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockOS takes a lock on the operating system's file name (created if
// missing) without waiting (see FS.Lock).
func lockOS(name string, shared bool, holder string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", name, err)
	}
	if err := lockFile(f, shared, false); err != nil {
		b := make([]byte, 256)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		if !lockBusy(err) {
			return nil, fmt.Errorf("lock %s: %w", name, err)
		}
		return nil, &LockedError{Name: name, Holder: strings.TrimSpace(string(b[:n]))}
	}
	if !shared && holder != "" {
		f.Truncate(0)
		f.WriteAt([]byte(holder+"\n"), 0)
	}
	return &osLock{f: f}, nil
}

type osLock struct {
	once sync.Once
	f    *os.File
	err  error
}

func (l *osLock) Close() error {
	l.once.Do(func() {
		l.err = errors.Join(unlockFile(l.f), l.f.Close())
	})
	return l.err
}

// MemLocks is an in-process lock table with FS.Lock's semantics, for
// filesystems that are not the operating system's (tests). The zero value
// is ready.
type MemLocks struct {
	mu    sync.Mutex
	locks map[string]*memLock
}

type memLock struct {
	shared int    // shared holders
	excl   bool   // an exclusive holder
	holder string // the exclusive holder's description
}

// Lock takes a lock on name as FS.Lock does.
func (m *MemLocks) Lock(name string, shared bool, holder string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks == nil {
		m.locks = map[string]*memLock{}
	}
	l := m.locks[name]
	if l == nil {
		l = &memLock{}
		m.locks[name] = l
	}
	if l.excl || (!shared && l.shared > 0) {
		h := l.holder
		if !l.excl {
			h = ""
		}
		return nil, &LockedError{Name: name, Holder: h}
	}
	if shared {
		l.shared++
	} else {
		l.excl, l.holder = true, holder
	}
	return &memRelease{m: m, name: name, shared: shared}, nil
}

type memRelease struct {
	m      *MemLocks
	name   string
	shared bool
	once   sync.Once
}

func (r *memRelease) Close() error {
	r.once.Do(func() {
		r.m.mu.Lock()
		defer r.m.mu.Unlock()
		l := r.m.locks[r.name]
		if r.shared {
			l.shared--
		} else {
			l.excl, l.holder = false, ""
		}
	})
	return nil
}
