package analysis

import (
	"unsafe"

	"github.com/spurdb/spur/trail"
)

// rowOutcome is an outcome in one breakdown row.
type rowOutcome struct {
	key Key
	funnelOutcome
}

// funnelRow is one breakdown row of a user: its value and its walker.
type funnelRow struct {
	key Key
	gen *genWalker
	uno *unoWalker
}

func (r *funnelRow) group(times []int64, masks []uint64, i, j int, base int32) {
	if r.gen != nil {
		r.gen.group(times, masks, nil, i, j, base)
	} else {
		r.uno.group(times, masks, nil, i, j, base)
	}
}

// funnelRows runs the per-row attributions of docs/analytics.md §11 for one user:
//
//   - all_steps: the row of value v walks the user's events whose value
//     is v only (its walker starts at the first step event with v: no
//     earlier event with v can change an empty walk);
//   - step k: the row of value v walks every event, step k filled only by
//     events with v. A base walker walks with step k filled by none; the
//     row of v is forked from it just before the first step-k event with
//     v, so each row's walk is exactly the one over the whole trail.
//
// Event indices stay whole-trail indices: a row's walker is given the
// chunk's masks with the other rows' events (all_steps) or step-k bits
// (step k) cleared.
type funnelRows struct {
	f     *Funnel
	group *keyGrouper // f.opt.Group, or nil
	step  uint64      // AttrStep: step k's mask bit; 0 for all_steps
	base  funnelRow
	rows  []funnelRow
	table slotTable
	masks []uint64
	vals  []Key
	out   []rowOutcome
	gens  []*genWalker // free walkers
	unos  []*unoWalker
}

func newFunnelRows(f *Funnel) *funnelRows {
	r := &funnelRows{f: f, group: f.group}
	if f.opt.Attribution == AttrStep {
		r.step = 1 << uint(f.opt.AttrStep-1)
		r.base = r.walker(Key{})
	}
	return r
}

// walker returns a fresh row walker for value v.
func (r *funnelRows) walker(v Key) funnelRow {
	row := funnelRow{key: v}
	if r.f.spec.Order == OrderUnordered {
		if n := len(r.unos); n > 0 {
			row.uno, r.unos = r.unos[n-1], r.unos[:n-1]
			row.uno.reset()
		} else {
			row.uno = newUnoWalker(&r.f.env)
		}
	} else {
		if n := len(r.gens); n > 0 {
			row.gen, r.gens = r.gens[n-1], r.gens[:n-1]
			row.gen.reset()
		} else {
			row.gen = newGenWalker(&r.f.env)
		}
	}
	return row
}

// fork returns a row for value v whose walker is a copy of the base's.
func (r *funnelRows) fork(v Key) funnelRow {
	row := funnelRow{key: v}
	if r.base.gen != nil {
		row.gen = r.base.gen.clone()
	} else {
		row.uno = r.base.uno.clone()
	}
	return row
}

func (r *funnelRows) reset() {
	for _, row := range r.rows {
		if row.gen != nil {
			r.gens = append(r.gens, row.gen)
		} else {
			r.unos = append(r.unos, row.uno)
		}
	}
	r.rows = r.rows[:0]
	r.table.reset()
	if r.base.gen != nil {
		r.base.gen.reset()
	}
	if r.base.uno != nil {
		r.base.uno.reset()
	}
}

func (r *funnelRows) bytes() int64 {
	n := int64(cap(r.masks))*8 + int64(cap(r.vals))*16 + int64(cap(r.out))*int64(unsafe.Sizeof(rowOutcome{})) + r.table.bytes()
	for _, row := range append(r.rows, r.base) {
		if row.gen != nil {
			n += row.gen.bytes()
		}
		if row.uno != nil {
			n += row.uno.bytes()
		}
	}
	return n
}

// value returns the row value of event e.
func (r *funnelRows) value(col *trail.Column, e int) Key {
	v := Key{Bits: col.Bits[e], Set: col.Set[e]}
	if g := r.group; g != nil {
		v, _ = g.group(v)
	}
	return v
}

// row returns the index of the row of v, -1 if none.
func (r *funnelRows) row(v Key) int {
	i, ok := r.table.get(v)
	if !ok {
		return -1
	}
	return int(i)
}

func (r *funnelRows) add(row funnelRow) {
	r.table.put(row.key, int32(len(r.rows)))
	r.rows = append(r.rows, row)
}

// chunk walks one chunk of the user's trail in every row.
func (r *funnelRows) chunk(tr *trail.Trail, masks []uint64) {
	env := &r.f.env
	col := &tr.Cols[r.f.opt.Key.Index]
	times := tr.Times
	base := int32(tr.Offset)
	if cap(r.masks) < len(times) {
		r.masks = make([]uint64, len(times))
		r.vals = make([]Key, len(times))
	}
	rm, vals := r.masks[:len(times)], r.vals[:len(times)]
	for i := range times {
		vals[i] = r.value(col, i)
	}
	unordered := r.f.spec.Order == OrderUnordered
	for i := 0; i < len(times); {
		j := i + 1
		for j < len(times) && times[j] == times[i] {
			j++
		}
		if r.step != 0 {
			// Rows of values first seen on a step-k event here fork from
			// the base as it was before this group (step 1 of an ordered
			// funnel only inside the range).
			inRange := uint64(times[i]-r.f.spec.From) < env.span
			for e := i; e < j; e++ {
				if masks[e]&r.step != 0 && (r.step != 1 || unordered || inRange) && r.row(vals[e]) < 0 {
					r.add(r.fork(vals[e]))
				}
			}
			for e := i; e < j; e++ {
				rm[e] = masks[e] &^ r.step
			}
			r.base.group(times, rm, i, j, base)
			for x := range r.rows {
				row := &r.rows[x]
				for e := i; e < j; e++ {
					rm[e] = masks[e] &^ r.step
					if vals[e] == row.key {
						rm[e] = masks[e]
					}
				}
				row.group(times, rm, i, j, base)
			}
		} else {
			for e := i; e < j; e++ {
				if masks[e]&env.stepMask != 0 && r.row(vals[e]) < 0 {
					r.add(r.walker(vals[e]))
				}
			}
			// Each row present in the group walks its own events.
			for e := i; e < j; e++ {
				x := r.row(vals[e])
				if x < 0 || (e > i && slicesIndexKey(vals[i:e], vals[e]) >= 0) {
					continue
				}
				v := vals[e]
				for d := i; d < j; d++ {
					rm[d] = 0
					if vals[d] == v {
						rm[d] = masks[d]
					}
				}
				r.rows[x].group(times, rm, i, j, base)
			}
		}
		i = j
	}
}

func slicesIndexKey(s []Key, v Key) int {
	for i, k := range s {
		if k == v {
			return i
		}
	}
	return -1
}

// finish returns the outcomes of every row, valid until the next user.
func (r *funnelRows) finish() []rowOutcome {
	r.out = r.out[:0]
	for x := range r.rows {
		row := &r.rows[x]
		var outs []funnelOutcome
		if row.gen != nil {
			outs = row.gen.finish()
		} else {
			outs = row.uno.finish()
		}
		for _, o := range outs {
			r.out = append(r.out, rowOutcome{key: row.key, funnelOutcome: o})
		}
	}
	return r.out
}
