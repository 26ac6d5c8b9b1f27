package testutil

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/spurdb/spur/trail"
)

// Chunks splits one user's whole trail tr into consecutive chunks by the
// rules of package trail: each chunk has at least one event (an empty
// trail gives one empty chunk), no chunk splits a group of equal
// timestamps, Offset counts the events of the earlier chunks and More is
// set on all but the last. Chunk sizes are random, drawn from r, aiming at
// about maxLen events (a tie group longer than that gets a chunk of its
// own). The chunks' slices are views of tr's; User and ID are shared.
func Chunks(tr *trail.Trail, r *rand.Rand, maxLen int) []trail.Trail {
	n := len(tr.Times)
	if n == 0 {
		c := *tr
		c.Offset, c.More = 0, false
		return []trail.Trail{c}
	}
	var out []trail.Trail
	for start := 0; start < n; {
		end := start + 1 + r.IntN(max(maxLen, 1))
		if end >= n {
			end = n
		} else {
			// Never split a tie group: move the cut back to a group
			// boundary, or forward past a group longer than the chunk.
			cut := end
			for cut > start && tr.Times[cut] == tr.Times[cut-1] {
				cut--
			}
			if cut == start {
				for cut = end; cut < n && tr.Times[cut] == tr.Times[cut-1]; cut++ {
				}
			}
			end = cut
		}
		out = append(out, slice(tr, start, end, end < n))
		start = end
	}
	return out
}

// slice returns events [i, j) of tr as a chunk.
func slice(tr *trail.Trail, i, j int, more bool) trail.Trail {
	c := trail.Trail{Times: tr.Times[i:j:j], Mask: tr.Mask[i:j:j], User: tr.User, ID: tr.ID, Offset: i, More: more}
	if tr.Cols != nil {
		c.Cols = make([]trail.Column, len(tr.Cols))
		for k, col := range tr.Cols {
			c.Cols[k] = trail.Column{Set: col.Set[i:j:j], Bits: col.Bits[i:j:j]}
		}
	}
	return c
}

// Lend calls f with a copy of chunk c in buffers of its own and spoils
// the copy when f returns (times, masks, column values and id
// overwritten), so that a visitor that keeps a chunk's slices past the
// call, against the rules of package trail, reads garbage rather than the
// data it expects. User values are shared, not copied.
func Lend(c *trail.Trail, f func(*trail.Trail)) {
	cp := *c
	cp.Times = slices.Clone(c.Times)
	cp.Mask = slices.Clone(c.Mask[:len(c.Times)])
	cp.ID = slices.Clone(c.ID)
	if c.Cols != nil {
		cp.Cols = make([]trail.Column, len(c.Cols))
		for k, col := range c.Cols {
			cp.Cols[k] = trail.Column{Set: slices.Clone(col.Set), Bits: slices.Clone(col.Bits)}
		}
	}
	f(&cp)
	for i := range cp.Times {
		cp.Times[i], cp.Mask[i] = math.MinInt64, ^uint64(0)
	}
	for _, col := range cp.Cols {
		for i := range col.Set {
			col.Set[i], col.Bits[i] = true, ^uint64(0)
		}
	}
	for i := range cp.ID {
		cp.ID[i] = '?'
	}
}
