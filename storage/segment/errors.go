package segment

import (
	"fmt"

	"github.com/spurdb/spur/internal/bin"
)

// ErrCorruption is matched (errors.Is) by every error that reports a
// checksum mismatch or a structurally invalid file of the store: a
// segment, and (through the aliases storage.ErrCorruption and
// wal.ErrCorruption) a catalog, settings or log file. Such errors are
// always a *CorruptionError naming the file and the byte offset. It is
// the store's one sentinel, bin.ErrCorruption.
var ErrCorruption = bin.ErrCorruption

// ErrNewerVersion is matched (errors.Is) by the error for a well-formed
// file whose format version is newer than this build reads: a segment
// whose header and trailer bytes agree on a version above Version, and
// (as storage.ErrUnsupportedVersion and wal.ErrUnsupportedVersion) a
// catalog, settings or log file. It does not match ErrCorruption: the
// file is presumably fine, the program is too old. It is
// bin.ErrNewerVersion.
var ErrNewerVersion = bin.ErrNewerVersion

// CorruptionError reports where a file of the store is corrupt: Path
// names it, Offset is the byte offset of the damaged structure (a
// segment's header, chunk, footer field or trailer; a catalog field; a
// log record), Msg says what is wrong there. storage.CorruptionError and
// wal.CorruptionError are this type, bin.CorruptionError.
type CorruptionError = bin.CorruptionError

// corruptf returns a *CorruptionError at off without a path; the Reader
// fills in the path before the error leaves the package.
func corruptf(off int64, format string, args ...any) *CorruptionError {
	return &CorruptionError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}
