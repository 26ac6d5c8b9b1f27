package segment

import (
	"errors"
	"fmt"
)

// ErrCorruption is matched (errors.Is) by every error that reports a
// checksum mismatch or a structurally invalid segment file. Such errors are
// always a *CorruptionError naming the file and the byte offset.
var ErrCorruption = errors.New("segment corruption")

// ErrNewerVersion is matched (errors.Is) by the error Open returns for a
// well-formed segment whose format version (both the header byte and the
// trailer byte agree) is newer than Version, the newest this build reads.
// It does not match ErrCorruption: the file is presumably fine, the program
// is too old.
var ErrNewerVersion = errors.New("segment format version is newer than supported")

// CorruptionError reports where a segment file is corrupt. Offset is a byte
// offset into the file (the start of the damaged structure: header, chunk,
// footer field or trailer); Msg says what is wrong there.
type CorruptionError struct {
	Path   string
	Offset int64
	Msg    string
}

// Error formats the error as "segment corruption in PATH at offset N: MSG".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("segment corruption in %s at offset %d: %s", e.Path, e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// corruptf returns a *CorruptionError at off without a path; the Reader
// fills in the path before the error leaves the package.
func corruptf(off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}
