package vfs

import "os"

// Linker is implemented by a filesystem that can make hard links: a
// second name for an existing file, sharing its bytes (os.Link). The
// store's backups hard-link segment files, which are never written again
// once published, and copy them where the filesystem has no Linker or the
// link fails (another filesystem: EXDEV).
type Linker interface {
	// Link makes newname a hard link to the file oldname. newname must
	// not exist. Like a create, the new name is durable only after a
	// Sync of its directory.
	Link(oldname, newname string) error
}

var _ Linker = osFS{}

// Link implements Linker (os.Link).
func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }
