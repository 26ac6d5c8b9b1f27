package segment

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
)

// Limits of the format. Write rejects an Input beyond them and Open treats a
// footer beyond them as corruption, so that no length read from a file can
// make the reader allocate more than a few hundred megabytes.
const (
	// MaxEventNames is the largest number of distinct event names a segment
	// holds (after the writer drops unused and duplicate names): event codes
	// are uint16.
	MaxEventNames = 65535
	// MaxBlockRows is the largest number of rows in one block. A block holds
	// whole users, so one user with more rows than this in one segment is
	// an error; WriterOptions.BlockRows may not exceed it either.
	MaxBlockRows = 1 << 24
	// MaxBlockUsers is the largest number of users in one block; the writer
	// starts a new block when a block reaches it.
	MaxBlockUsers = 1 << 20
	// DefaultBlockRows is the target block size when WriterOptions.BlockRows
	// is 0.
	DefaultBlockRows = 65536
)

// User is one user's run of consecutive rows in an Input.
//
// Hash is the user key's hash as computed by the caller (the segment format
// does not compute it); ID is the user_id, at most event.MaxUserIDBytes
// bytes; Rows ≥ 1 is the number of consecutive rows of the user.
type User struct {
	Hash uint64
	ID   string
	Rows int
}

// PropColumn is one property column of an Input, one entry per row.
//
// Present is a bitmap of len (rows+63)/64 words: bit r%64 of word r/64 set
// means row r has a value; bits at or beyond the row count must be zero.
// Exactly one value slice is used, with one entry per row (entries of
// absent rows are ignored): Ints for TypeInt, TypeBool (0 or 1) and
// TypeTime (UTC microseconds); Floats for TypeFloat; Strs for TypeString,
// each a code into Dict. Dict may hold unused or duplicate strings: the
// writer keeps only the used ones, deduplicated and sorted.
type PropColumn struct {
	Name    string
	Type    event.Type
	Present []uint64  // bitmap: bit r set = row r has a value
	Ints    []int64   // TypeInt, TypeBool (0/1), TypeTime (µs)
	Floats  []float64 // TypeFloat
	Strs    []uint32  // TypeString: codes into Dict
	Dict    []string  // TypeString dictionary
}

// Input is the content of one segment: the events of one shard for some
// time range, rows sorted by (user Hash, user ID bytes, Time, arrival).
//
// Users lists the consecutive runs of rows per user, strictly increasing by
// (Hash, ID); the sum of their Rows is len(Times). Times are UTC
// microseconds, non-decreasing within each user. Events[r] is a code into
// EventNames, which may hold unused or duplicate names (the writer keeps
// only the used ones, deduplicated and sorted; at most MaxEventNames).
// Props are the property columns, names unique and non-empty. Write does
// not modify or retain the Input.
type Input struct {
	Users      []User
	Times      []int64
	Events     []uint32
	EventNames []string
	Props      []PropColumn
}

// dictMap is a compacted dictionary: the used entries of an input
// dictionary, deduplicated and sorted, and the mapping of input codes to it.
type dictMap struct {
	names []string // written dictionary, sorted, unique
	code  []uint32 // input code → written code (only meaningful for used codes)
}

// compactDict builds the written dictionary of dict from the used marks.
func compactDict(dict []string, used []bool) dictMap {
	names := make([]string, 0, len(dict))
	for c, u := range used {
		if u {
			names = append(names, dict[c])
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	m := dictMap{names: names, code: make([]uint32, len(dict))}
	for c, u := range used {
		if u {
			i, _ := slices.BinarySearch(names, dict[c])
			m.code[c] = uint32(i)
		}
	}
	return m
}

// prepared is a validated Input with its dictionaries compacted.
type prepared struct {
	in     *Input
	events dictMap
	props  []dictMap // per prop; zero for non-string props
	starts []int     // row offset of each user, len(Users)+1
}

// validate checks in against the Input contract and compacts its
// dictionaries. Errors name the offending user, row or property.
func validate(in *Input) (*prepared, error) {
	n := len(in.Times)
	if len(in.Events) != n {
		return nil, fmt.Errorf("input has %d times but %d events", n, len(in.Events))
	}
	p := &prepared{in: in, starts: make([]int, len(in.Users)+1)}
	rows := 0
	for i := range in.Users {
		u := &in.Users[i]
		if u.Rows < 1 {
			return nil, fmt.Errorf("user %d (%q) has %d rows, want ≥ 1", i, u.ID, u.Rows)
		}
		if u.Rows > MaxBlockRows {
			return nil, fmt.Errorf("user %d (%q) has %d rows, more than the %d rows a block may hold", i, u.ID, u.Rows, MaxBlockRows)
		}
		if len(u.ID) > event.MaxUserIDBytes {
			return nil, fmt.Errorf("user %d id is %d bytes, longer than %d", i, len(u.ID), event.MaxUserIDBytes)
		}
		if i > 0 {
			v := &in.Users[i-1]
			if c := cmp.Or(cmp.Compare(v.Hash, u.Hash), strings.Compare(v.ID, u.ID)); c >= 0 {
				return nil, fmt.Errorf("users %d (%#x %q) and %d (%#x %q) are not strictly increasing by (hash, id)", i-1, v.Hash, v.ID, i, u.Hash, u.ID)
			}
		}
		if u.Rows > n-rows {
			return nil, fmt.Errorf("users hold more rows than the %d times (at user %d)", n, i)
		}
		for r := rows + 1; r < rows+u.Rows; r++ {
			if in.Times[r] < in.Times[r-1] {
				return nil, fmt.Errorf("row %d (user %d %q): time %d µs is before the previous row's %d µs", r, i, u.ID, in.Times[r], in.Times[r-1])
			}
		}
		rows += u.Rows
		p.starts[i+1] = rows
	}
	if rows != n {
		return nil, fmt.Errorf("users hold %d rows but there are %d times", rows, n)
	}

	used := make([]bool, len(in.EventNames))
	for r, c := range in.Events {
		if int64(c) >= int64(len(used)) {
			return nil, fmt.Errorf("row %d: event code %d out of range (%d event names)", r, c, len(used))
		}
		used[c] = true
	}
	p.events = compactDict(in.EventNames, used)
	if len(p.events.names) > MaxEventNames {
		return nil, fmt.Errorf("segment would have %d distinct event names, more than %d", len(p.events.names), MaxEventNames)
	}

	words := (n + 63) / 64
	names := make(map[string]bool, len(in.Props))
	p.props = make([]dictMap, len(in.Props))
	for pi := range in.Props {
		col := &in.Props[pi]
		if col.Name == "" {
			return nil, fmt.Errorf("property %d has an empty name", pi)
		}
		if names[col.Name] {
			return nil, fmt.Errorf("property %q appears twice", col.Name)
		}
		names[col.Name] = true
		if len(col.Present) != words {
			return nil, fmt.Errorf("property %q: presence bitmap has %d words, want %d for %d rows", col.Name, len(col.Present), words, n)
		}
		if n%64 != 0 && col.Present[words-1]>>(n%64) != 0 {
			return nil, fmt.Errorf("property %q: presence bits set beyond row %d", col.Name, n)
		}
		var vals int
		switch col.Type {
		case event.TypeInt, event.TypeBool, event.TypeTime:
			vals = len(col.Ints)
		case event.TypeFloat:
			vals = len(col.Floats)
		case event.TypeString:
			vals = len(col.Strs)
		default:
			return nil, fmt.Errorf("property %q has invalid type %v", col.Name, col.Type)
		}
		if vals != n {
			return nil, fmt.Errorf("property %q (%v) has %d values, want one per row (%d)", col.Name, col.Type, vals, n)
		}
		switch col.Type {
		case event.TypeBool:
			for r, v := range col.Ints {
				if v&^1 != 0 && present(col.Present, r) {
					return nil, fmt.Errorf("property %q (bool) row %d: value %d is not 0 or 1", col.Name, r, v)
				}
			}
		case event.TypeString:
			used := make([]bool, len(col.Dict))
			for r, c := range col.Strs {
				if !present(col.Present, r) {
					continue
				}
				if int64(c) >= int64(len(used)) {
					return nil, fmt.Errorf("property %q row %d: string code %d out of range (dictionary of %d)", col.Name, r, c, len(used))
				}
				used[c] = true
			}
			p.props[pi] = compactDict(col.Dict, used)
		}
	}
	return p, nil
}

// present reports whether bit r of the bitmap is set.
func present(bm []uint64, r int) bool { return bm[r>>6]&(1<<(uint(r)&63)) != 0 }

// popcount returns the number of set bits of bm.
func popcount(bm []uint64) int {
	n := 0
	for _, w := range bm {
		n += bits.OnesCount64(w)
	}
	return n
}
