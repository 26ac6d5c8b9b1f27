package segment

import (
	"errors"
	"fmt"
)

// ErrCorruption is matched (errors.Is) by every error that reports a
// checksum mismatch or a structurally invalid file of the store: a
// segment, and (through the aliases storage.ErrCorruption and
// wal.ErrCorruption) a catalog, settings or log file. Such errors are
// always a *CorruptionError naming the file and the byte offset.
var ErrCorruption = errors.New("corruption")

// ErrNewerVersion is matched (errors.Is) by the error for a well-formed
// file whose format version is newer than this build reads: a segment
// whose header and trailer bytes agree on a version above Version, and
// (as storage.ErrUnsupportedVersion and wal.ErrUnsupportedVersion) a
// catalog, settings or log file. It does not match ErrCorruption: the
// file is presumably fine, the program is too old.
var ErrNewerVersion = errors.New("format version is newer than this build reads")

// CorruptionError reports where a file of the store is corrupt: Path
// names it, Offset is the byte offset of the damaged structure (a
// segment's header, chunk, footer field or trailer; a catalog field; a
// log record), Msg says what is wrong there. storage.CorruptionError and
// wal.CorruptionError are this type.
type CorruptionError struct {
	Path   string
	Offset int64
	Msg    string
}

// Error formats the error as "corruption in PATH at offset N: MSG".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corruption in %s at offset %d: %s", e.Path, e.Offset, e.Msg)
}

// Is makes errors.Is(err, ErrCorruption) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorruption }

// corruptf returns a *CorruptionError at off without a path; the Reader
// fills in the path before the error leaves the package.
func corruptf(off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}
