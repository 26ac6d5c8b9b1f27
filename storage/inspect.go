package storage

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// Inspection summarises an app's storage for `spur inspect`.
type Inspection struct {
	App        string             `json:"app"`
	Shards     int                `json:"shards"`
	Generation uint64             `json:"generation"`
	Segments   []SegmentRef       `json:"segments"`
	Events     int64              `json:"events"`      // rows of events segments
	Users      int64              `json:"users"`       // distinct users with at least one event (exact, by a scan)
	UserRows   int64              `json:"user_rows"`   // rows of users segments (user property writes)
	Bytes      int64              `json:"bytes"`       // bytes of all segment files
	MinTime    int64              `json:"min_time"`    // UTC µs of the earliest event
	MaxTime    int64              `json:"max_time"`    // UTC µs of the latest event
	EventNames []string           `json:"event_names"` // distinct event names, sorted
	Columns    []ColumnInspection `json:"columns"`     // per column of events segments, summed over segments
}

// ColumnInspection is one column's storage over all events segments of an app.
type ColumnInspection struct {
	Name            string   `json:"name"`
	Encodings       []string `json:"encodings"`        // distinct encodings used by its chunks (segment.ColumnStats.Encoding parts)
	CompressedBytes int64    `json:"compressed_bytes"` // stored bytes
	RawBytes        int64    `json:"raw_bytes"`        // decoded bytes
	BytesPerEvent   float64  `json:"bytes_per_event"`  // CompressedBytes / events
}

type countUsers struct{ n *atomic.Int64 }

func (c countUsers) Visit(UserKey, *trail.Trail) { c.n.Add(1) }

// Inspect opens (and verifies) every segment of the snapshot and sums its
// storage per column. It counts distinct users with one scan. Errors are
// those of opening a segment (I/O or corruption).
func (s *Version) Inspect(ctx context.Context) (*Inspection, error) {
	m := s.Catalog
	in := &Inspection{App: m.App, Shards: m.Shards, Generation: m.Generation, Segments: m.Segments}
	names := map[string]bool{}
	cols := map[string]*ColumnInspection{}
	var order []string
	first := true
	for _, ref := range m.Segments {
		in.Bytes += ref.Bytes
		if ref.Kind == KindUsers {
			in.UserRows += ref.Rows
			continue
		}
		in.Events += ref.Rows
		if first || ref.MinTime < in.MinTime {
			in.MinTime = ref.MinTime
		}
		if first || ref.MaxTime > in.MaxTime {
			in.MaxTime = ref.MaxTime
		}
		first = false
		r, err := s.Reader(ref)
		if err != nil {
			return nil, err
		}
		meta := r.Meta()
		for _, n := range meta.EventNames {
			names[n] = true
		}
		for _, c := range meta.Columns {
			ci := cols[c.Name]
			if ci == nil {
				ci = &ColumnInspection{Name: c.Name}
				cols[c.Name] = ci
				order = append(order, c.Name)
			}
			ci.CompressedBytes += c.CompressedBytes
			ci.RawBytes += c.RawBytes
			for _, enc := range strings.FieldsFunc(c.Encoding, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
				if !slices.Contains(ci.Encodings, enc) {
					ci.Encodings = append(ci.Encodings, enc)
				}
			}
		}
	}
	for n := range names {
		in.EventNames = append(in.EventNames, n)
	}
	slices.Sort(in.EventNames)
	for _, n := range order {
		ci := cols[n]
		if in.Events > 0 {
			ci.BytesPerEvent = math.Round(float64(ci.CompressedBytes)/float64(in.Events)*1000) / 1000
		}
		in.Columns = append(in.Columns, *ci)
	}
	var users atomic.Int64
	vs := make([]Visitor, DefaultWorkers())
	for i := range vs {
		vs[i] = countUsers{&users}
	}
	all := func(meta *segment.Meta) []uint64 {
		out := make([]uint64, len(meta.EventNames))
		for i := range out {
			out[i] = 1
		}
		return out
	}
	if _, err := s.Scan(ctx, ScanSpec{From: math.MinInt64, To: math.MaxInt64, Masks: all}, vs); err != nil {
		return nil, err
	}
	in.Users = users.Load()
	return in, nil
}
