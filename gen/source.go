package gen

import (
	"io"

	"github.com/spurdb/spur/event"
)

// Source adapts a Generator to the reader shape of imports: storage.Source
// and ingest.Reader (Next fills ev and returns io.EOF after the last event;
// strings stay valid after later calls, ev.Props is overwritten by the
// next call), and event.BatchReader (NextBatch, batch.go), which imports
// read without an event.Event per row.
type Source struct{ G *Generator }

// Next reads the next event into ev; io.EOF at the end.
func (s Source) Next(ev *event.Event) error {
	if !s.G.Next(ev) {
		return io.EOF
	}
	return nil
}

// UserSource adapts a UserStream the same way (users-file rows).
type UserSource struct{ S *UserStream }

// Next reads the next user row into ev; io.EOF at the end.
func (s UserSource) Next(ev *event.Event) error {
	if !s.S.Next(ev) {
		return io.EOF
	}
	return nil
}
