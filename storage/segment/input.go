package segment

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
)

// Limits of the format. The writer rejects data beyond them and Open treats
// a footer beyond them as corruption, so that no length read from a file
// can make the reader allocate more than a few hundred megabytes.
const (
	// MaxEventNames is the largest number of distinct event names a
	// segment holds: event codes are below 2^31 (stored in up to 32
	// bits). In practice a writer's caller ends a segment long before,
	// when its dictionaries grow large (Writer.Bytes).
	MaxEventNames = 1<<31 - 1
	// MaxBlockRows is the largest number of rows in one block, and
	// WriterOptions.BlockRows and SplitRows may not exceed it. It does
	// not limit a user: a user with more rows than a block holds
	// continues in the next block (BlockMeta.Continued).
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
// writer keeps only the used ones, once each.
type PropColumn struct {
	Name    string
	Type    event.Type
	Present []uint64  // bitmap: bit r set = row r has a value
	Ints    []int64   // TypeInt, TypeBool (0/1), TypeTime (µs)
	Floats  []float64 // TypeFloat
	Strs    []uint32  // TypeString: codes into Dict
	Dict    []string  // TypeString dictionary
}

// Input is a run of rows of one shard, columnar, sorted by (user Hash,
// user ID bytes, Time, arrival): the content of a segment for Write, or a
// piece of it for Writer.AppendInput.
//
// Users lists the consecutive runs of rows per user, strictly increasing by
// (Hash, ID); the sum of their Rows is len(Times). Times are UTC
// microseconds, non-decreasing within each user. Events[r] is a code into
// EventNames, which may hold unused or duplicate names (the writer keeps
// only the used ones, once each). Props are the property columns, names
// unique and non-empty. The writer does not modify or retain an Input.
type Input struct {
	Users      []User
	Times      []int64
	Events     []uint32
	EventNames []string
	Props      []PropColumn
}

// PropSpecs returns the writer's declaration of in's property columns,
// in their order: name, type and, for a string column, the number of
// distinct codes its rows use (PropSpec.Strings; a dictionary may hold
// more, such as an importer's whole dictionary). Cost: one pass over each
// string column's rows and a bitset of its dictionary's length,
// transient. The result is the caller's.
func (in *Input) PropSpecs() []PropSpec {
	out := make([]PropSpec, len(in.Props))
	var seen []uint64
	for i := range in.Props {
		p := &in.Props[i]
		out[i] = PropSpec{Name: p.Name, Type: p.Type}
		if p.Type != event.TypeString {
			continue
		}
		seen = slices.Grow(seen[:0], (len(p.Dict)+63)/64)[:(len(p.Dict)+63)/64]
		clear(seen)
		n := 0
		for w, word := range p.Present {
			for ; word != 0; word &= word - 1 {
				r := w*64 + bits.TrailingZeros64(word)
				if r >= len(p.Strs) {
					break // checkInput reports it
				}
				if c := p.Strs[r]; int(c) < len(p.Dict) && seen[c/64]&(1<<(c%64)) == 0 {
					seen[c/64] |= 1 << (c % 64)
					n++
				}
			}
		}
		out[i].Strings = n
	}
	return out
}

// checkInput checks in against the Input contract (but not against a
// writer's columns or its last user). Errors name the offending user,
// row or property.
func checkInput(in *Input) error {
	n := len(in.Times)
	if len(in.Events) != n {
		return fmt.Errorf("input has %d times but %d events", n, len(in.Events))
	}
	rows := 0
	for i := range in.Users {
		u := &in.Users[i]
		if u.Rows < 1 {
			return fmt.Errorf("user %d (%q) has %d rows, want ≥ 1", i, u.ID, u.Rows)
		}
		if len(u.ID) > event.MaxUserIDBytes {
			return fmt.Errorf("user %d id is %d bytes, longer than %d", i, len(u.ID), event.MaxUserIDBytes)
		}
		if i > 0 {
			v := &in.Users[i-1]
			if c := cmp.Or(cmp.Compare(v.Hash, u.Hash), strings.Compare(v.ID, u.ID)); c >= 0 {
				return fmt.Errorf("users %d (%#x %q) and %d (%#x %q) are not strictly increasing by (hash, id)", i-1, v.Hash, v.ID, i, u.Hash, u.ID)
			}
		}
		if u.Rows > n-rows {
			return fmt.Errorf("users hold more rows than the %d times (at user %d)", n, i)
		}
		for r := rows + 1; r < rows+u.Rows; r++ {
			if in.Times[r] < in.Times[r-1] {
				return fmt.Errorf("row %d (user %d %q): time %d µs is before the previous row's %d µs", r, i, u.ID, in.Times[r], in.Times[r-1])
			}
		}
		rows += u.Rows
	}
	if rows != n {
		return fmt.Errorf("users hold %d rows but there are %d times", rows, n)
	}
	for r, c := range in.Events {
		if int64(c) >= int64(len(in.EventNames)) {
			return fmt.Errorf("row %d: event code %d out of range (%d event names)", r, c, len(in.EventNames))
		}
	}

	words := (n + 63) / 64
	for pi := range in.Props {
		col := &in.Props[pi]
		if col.Name == "" {
			return fmt.Errorf("property %d has an empty name", pi)
		}
		for _, p := range in.Props[:pi] {
			if p.Name == col.Name {
				return fmt.Errorf("property %q appears twice", col.Name)
			}
		}
		if len(col.Present) != words {
			return fmt.Errorf("property %q: presence bitmap has %d words, want %d for %d rows", col.Name, len(col.Present), words, n)
		}
		if n%64 != 0 && col.Present[words-1]>>(n%64) != 0 {
			return fmt.Errorf("property %q: presence bits set beyond row %d", col.Name, n)
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
			return fmt.Errorf("property %q has invalid type %v", col.Name, col.Type)
		}
		if vals != n {
			return fmt.Errorf("property %q (%v) has %d values, want one per row (%d)", col.Name, col.Type, vals, n)
		}
		switch col.Type {
		case event.TypeBool:
			for r, v := range col.Ints {
				if v&^1 != 0 && present(col.Present, r) {
					return fmt.Errorf("property %q (bool) row %d: value %d is not 0 or 1", col.Name, r, v)
				}
			}
		case event.TypeString:
			for r, c := range col.Strs {
				if int64(c) >= int64(len(col.Dict)) && present(col.Present, r) {
					return fmt.Errorf("property %q row %d: string code %d out of range (dictionary of %d)", col.Name, r, c, len(col.Dict))
				}
			}
		}
	}
	return nil
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
