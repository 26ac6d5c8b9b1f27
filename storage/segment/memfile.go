package segment

import (
	"bytes"
	"errors"
)

// MemFile is a File in memory, for segments that are never written to
// disk (the live layer's sealed segments): a Writer writes it through a
// small buffer, and Bytes returns the segment once the Writer has closed
// it, to be read with NewReader(bytes.NewReader(b), len(b), name). Sync
// does nothing. It is not safe for concurrent use.
type MemFile struct {
	buf    bytes.Buffer
	closed bool
}

// Write appends p. It fails after Close.
func (f *MemFile) Write(p []byte) (int, error) {
	if f.closed {
		return 0, errors.New("segment: write to a closed MemFile")
	}
	return f.buf.Write(p)
}

// Sync does nothing: memory is as durable as it gets.
func (f *MemFile) Sync() error { return nil }

// Close marks the file complete.
func (f *MemFile) Close() error {
	f.closed = true
	return nil
}

// Bytes returns the file's contents: a segment after a successful
// Writer.Close. The slice is the MemFile's own; the caller must not
// modify it.
func (f *MemFile) Bytes() []byte { return f.buf.Bytes() }
