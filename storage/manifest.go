package storage

import (
	"encoding/json"

	"fmt"
	"os"
	"path/filepath"

	"github.com/spurdb/spur/event"
)

const (
	manifestName    = "manifest.json"
	manifestVersion = 1
	segDir          = "seg"
)

// SegmentKind says what a segment holds.
type SegmentKind string

// Segment kinds.
const (
	KindEvents SegmentKind = "events" // events
	KindUsers  SegmentKind = "users"  // user property writes ("$set" rows)
)

// SegmentRef is one published segment in a manifest.
type SegmentRef struct {
	File    string      `json:"file"`     // file name under DIR/apps/APP/seg
	Kind    SegmentKind `json:"kind"`     // events or users
	Shard   int         `json:"shard"`    // shard index
	Seq     int64       `json:"seq"`      // arrival order of the segment's rows relative to other segments (ties in a trail break by Seq)
	Rows    int64       `json:"rows"`     // rows (events)
	Users   int64       `json:"users"`    // distinct users
	MinTime int64       `json:"min_time"` // UTC µs of the earliest row
	MaxTime int64       `json:"max_time"` // UTC µs of the latest row
	Bytes   int64       `json:"bytes"`    // file size
	// FirstHash and LastHash are the user-key hashes (xxhash64 of the user
	// id) of the segment's first and last user, when known (both 0 =
	// unknown; compaction writes them). Segments of one shard and kind
	// whose ranges are disjoint hold no common user, which lets the scan
	// read them one after the other with a single cursor.
	FirstHash uint64 `json:"first_hash,omitempty"`
	LastHash  uint64 `json:"last_hash,omitempty"`
}

// Manifest is the published state of an app. It is replaced atomically as
// a whole; a Manifest value is never modified after publication.
type Manifest struct {
	FormatVersion int              `json:"format_version"`
	App           string           `json:"app"`
	Shards        int              `json:"shards"`
	TZ            string           `json:"tz,omitempty"` // the app's default time zone (IANA); empty = UTC
	Generation    int64            `json:"generation"`   // +1 per publication
	NextSeq       int64            `json:"next_seq"`
	EventProps    []event.PropType `json:"event_props"` // event property types, in order of first sighting
	UserProps     []event.PropType `json:"user_props"`  // user property types, in order of first sighting
	Segments      []SegmentRef     `json:"segments"`
}

// Rows returns the number of rows in the segments of the given kind.
func (m *Manifest) Rows(kind SegmentKind) int64 {
	var n int64
	for _, s := range m.Segments {
		if s.Kind == kind {
			n += s.Rows
		}
	}
	return n
}

// TimeRange returns the earliest and latest row time (UTC µs) over the
// segments of the given kind; ok is false when there are none.
func (m *Manifest) TimeRange(kind SegmentKind) (min, max int64, ok bool) {
	for _, s := range m.Segments {
		if s.Kind != kind || s.Rows == 0 {
			continue
		}
		if !ok || s.MinTime < min {
			min = s.MinTime
		}
		if !ok || s.MaxTime > max {
			max = s.MaxTime
		}
		ok = true
	}
	return min, max, ok
}

func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", filepath.Join(dir, manifestName), err)
	}
	if m.FormatVersion > manifestVersion {
		return nil, fmt.Errorf("manifest %s: format version %d is newer than this build supports (%d)",
			filepath.Join(dir, manifestName), m.FormatVersion, manifestVersion)
	}
	return &m, nil
}

// writeManifest publishes m atomically: temp file, fsync, rename, fsync dir.
func writeManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, manifestName+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write manifest: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write manifest %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync manifest %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close manifest %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, manifestName)); err != nil {
		return fmt.Errorf("publish manifest: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
