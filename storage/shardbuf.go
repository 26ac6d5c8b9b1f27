package storage

import (
	"cmp"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
)

// shardBuf buffers one shard's rows of an import in arrival order,
// columnar. Properties are sparse: (row, value) pairs per property.
type shardBuf struct {
	hint int // rows expected in this buffer (0: unknown), for sizing

	// Users: user i has hash userHash[i] and id idBytes[userOff[i]:userOff[i+1]].
	userIdx  map[uint64]uint32 // hash → the first user with it
	userColl map[string]uint32 // users whose hash an earlier user has; nil until one
	userHash []uint64
	userOff  []int // one more than users, from 0
	idBytes  []byte
	lastIdx  uint32 // fast path: consecutive rows of one user skip the map
	hasLast  bool

	rowUser []uint32
	times   []int64
	events  []uint32
	props   []sparseProp // by importer prop index

	// Insert ids: the insert-id property's value k (code k in its
	// sparseProp) is iids[iidOff[k]:iidOff[k+1]]. They are kept per shard
	// buffer, not in an importer dictionary, because nearly every one is
	// distinct: interning each in an importer-wide map, besides the
	// segment writer's, took 7 % of live ingestion's CPU.
	iids   []byte
	iidOff []int // one more than values, from 0 (empty until the first)
}

// sparseProp holds one property's values in a shard buffer, in the order
// they were added: value j belongs to row j for j < dense (a property set
// on every row so far needs no row numbers), else to row rows[j-dense].
// The values are in ints (int, bool, time), floats or codes (strings:
// codes into the importer's dictionary of the property).
type sparseProp struct {
	dense  int
	rows   []uint32
	ints   []int64
	floats []float64
	codes  []uint32
}

// addRow records that the next value belongs to row r.
func (sp *sparseProp) addRow(r uint32) {
	if len(sp.rows) == 0 && int(r) == sp.dense {
		sp.dense++
		return
	}
	sp.rows = append(sp.rows, r)
}

// row returns the row of value j.
func (sp *sparseProp) row(j int) uint32 {
	if j < sp.dense {
		return uint32(j)
	}
	return sp.rows[j-sp.dense]
}

// len returns the number of values.
func (sp *sparseProp) len() int { return sp.dense + len(sp.rows) }

func newShardBuf() *shardBuf {
	return &shardBuf{userIdx: map[uint64]uint32{}, userOff: []int{0}}
}

// bytes returns the memory the buffer's rows take, bytes: its slices'
// lengths and an estimate of its maps (capacities reserved ahead do not
// count: reserve sizes them for what the flush threshold lets in).
func (sb *shardBuf) bytes() int64 {
	n := int64(len(sb.userHash)+len(sb.userOff)+len(sb.times))*8 + int64(len(sb.idBytes))
	n += int64(len(sb.rowUser)+len(sb.events))*4 + int64(len(sb.iids)) + int64(len(sb.iidOff))*8
	n += int64(len(sb.userIdx)+len(sb.userColl)) * 24
	for i := range sb.props {
		sp := &sb.props[i]
		n += int64(len(sp.rows)+len(sp.codes))*4 + int64(len(sp.ints)+len(sp.floats))*8
	}
	return n
}

// reset empties the buffer, keeping its memory for the next rows up to
// keep rows' worth: a slice (or the users map) grown past that — in a
// flush whose rows went mostly to this shard, as a heavy user's do — is
// released, so that the buffers of a long import do not ratchet up to
// the largest share each shard ever took (import memory grew from 550 MiB
// at 100M events to 1.4 GiB at 700M before).
func (sb *shardBuf) reset(keep int) {
	if len(sb.userIdx) > keep/8 || len(sb.times) > keep {
		sb.userIdx = map[uint64]uint32{}
	} else {
		clear(sb.userIdx)
	}
	sb.userColl = nil
	sb.userHash, sb.userOff, sb.idBytes = shrink(sb.userHash, keep), append(shrink(sb.userOff, keep), 0), shrink(sb.idBytes, 8*keep)
	sb.lastIdx, sb.hasLast = 0, false
	sb.rowUser, sb.times, sb.events = shrink(sb.rowUser, keep), shrink(sb.times, keep), shrink(sb.events, keep)
	sb.iids, sb.iidOff = shrink(sb.iids, 32*keep), shrink(sb.iidOff, keep)
	for i := range sb.props {
		sp := &sb.props[i]
		sp.dense, sp.rows, sp.ints, sp.floats, sp.codes = 0, shrink(sp.rows, keep), shrink(sp.ints, keep), shrink(sp.floats, keep), shrink(sp.codes, keep)
	}
}

// shrink returns s emptied, or nil when its capacity is over keep.
func shrink[T any](s []T, keep int) []T {
	if cap(s) > keep {
		return nil
	}
	return s[:0]
}

// reserve sizes the (empty) buffer for about rows rows, so that appending
// them does not copy; property buffers are sized on first use (sizeProp).
func (sb *shardBuf) reserve(rows int) {
	sb.hint = rows
	if more := rows - len(sb.times); more > 0 {
		sb.rowUser = slices.Grow(sb.rowUser, more)
		sb.times = slices.Grow(sb.times, more)
		sb.events = slices.Grow(sb.events, more)
	}
	n := len(sb.times)
	if n == 0 {
		return
	}
	// Properties already seen: room for their share of the rows so far.
	for i := range sb.props {
		sp := &sb.props[i]
		want := int(float64(rows)*float64(sp.len())/float64(n)*1.125) + 256
		if len(sp.rows) > 0 {
			sp.rows = slices.Grow(sp.rows, want-len(sp.rows))
		}
		switch {
		case len(sp.ints) > 0:
			sp.ints = slices.Grow(sp.ints, want-len(sp.ints))
		case len(sp.floats) > 0:
			sp.floats = slices.Grow(sp.floats, want-len(sp.floats))
		case len(sp.codes) > 0:
			sp.codes = slices.Grow(sp.codes, want-len(sp.codes))
		}
	}
}

// sizeProp sizes the still unused buffer sp of a property of type t for
// the fraction frac of the rows reserve expects.
func (sb *shardBuf) sizeProp(sp *sparseProp, t event.Type, frac float64) {
	if sb.hint == 0 || sp.len() > 0 || cap(sp.ints)+cap(sp.floats)+cap(sp.codes) > 0 {
		return
	}
	n := int(float64(sb.hint)*frac*1.25) + 256
	switch t {
	case event.TypeFloat:
		sp.floats = make([]float64, 0, n)
	case event.TypeString:
		sp.codes = make([]uint32, 0, n)
	default:
		sp.ints = make([]int64, 0, n)
	}
}

// userIndex returns the index of user id (hash h) in the buffer, adding it
// (a copy) if it is new.
func (sb *shardBuf) userIndex(id string, h uint64) uint32 {
	i, ok := sb.userIdx[h]
	if !ok {
		i = sb.newUser(id, h)
		sb.userIdx[h] = i
		return i
	}
	if string(sb.userID(i)) == id {
		return i
	}
	if j, ok := sb.userColl[id]; ok { // a 64-bit hash collision
		return j
	}
	if sb.userColl == nil {
		sb.userColl = map[string]uint32{}
	}
	j := sb.newUser(id, h)
	sb.userColl[strings.Clone(id)] = j
	return j
}

func (sb *shardBuf) newUser(id string, h uint64) uint32 {
	i := uint32(len(sb.userHash))
	sb.idBytes = append(sb.idBytes, id...)
	sb.userOff = append(sb.userOff, len(sb.idBytes))
	sb.userHash = append(sb.userHash, h)
	return i
}

// userID returns user i's id, borrowed from the buffer.
func (sb *shardBuf) userID(i uint32) []byte { return sb.idBytes[sb.userOff[i]:sb.userOff[i+1]] }

// prop returns the buffer of importer property pi.
func (sb *shardBuf) prop(pi int) *sparseProp {
	for len(sb.props) <= pi {
		sb.props = append(sb.props, sparseProp{})
	}
	return &sb.props[pi]
}

func (sb *shardBuf) addUser(id string, h uint64) {
	if sb.hasLast && string(sb.userID(sb.lastIdx)) == id {
		sb.rowUser = append(sb.rowUser, sb.lastIdx)
		return
	}
	i := sb.userIndex(id, h)
	sb.lastIdx, sb.hasLast = i, true
	sb.rowUser = append(sb.rowUser, i)
}

func (sb *shardBuf) addProp(pi int, row uint32, v event.Value, im *importer) {
	sp := sb.prop(pi)
	sp.addRow(row)
	switch v.Type {
	case event.TypeFloat:
		sp.floats = append(sp.floats, v.Float)
	case event.TypeString:
		sp.codes = append(sp.codes, im.props[pi].code(v.Str))
	default: // int, bool, time
		sp.ints = append(sp.ints, v.Int)
	}
}

// addInsertID adds insert id id to row r as a value of importer property
// pi (InsertIDProp), its code the value's index in the buffer.
func (sb *shardBuf) addInsertID(pi int, r uint32, id string) {
	sp := sb.prop(pi)
	sp.addRow(r)
	if len(sb.iidOff) == 0 {
		sb.iidOff = append(sb.iidOff, 0)
	}
	sp.codes = append(sp.codes, uint32(len(sb.iidOff)-1))
	sb.iids = append(sb.iids, id...)
	sb.iidOff = append(sb.iidOff, len(sb.iids))
}

// insertID returns the insert id of code c, borrowed from the buffer.
func (sb *shardBuf) insertID(c uint32) []byte { return sb.iids[sb.iidOff[c]:sb.iidOff[c+1]] }

// builder holds the memory build returns and its scratch, reused from
// shard to shard by one flush worker.
type builder struct {
	order, rank, perm, inv []uint32
	start, fill            []int32
	iid                    []uint32            // dedup: per arrival row, insert-id code + 1 (0: none)
	seen                   map[iidKey]struct{} // dedup of large tie groups
	iidDict                []string            // the insert-id column's dictionary: the buffer's insert ids
	dropped                int64               // duplicates dropped by this builder's builds
	in                     segment.Input
	cols                   []segment.PropColumn // per position in in.Props: its buffers
}

// build sorts the shard's rows by (user hash, user id, time, arrival) and
// returns them as a segment input whose dictionaries are d's (the
// importer's as the flush started; the writer keeps only the entries a
// segment uses). The input is bt's memory: valid until bt's next build.
func (sb *shardBuf) build(d *flushDicts, bt *builder) *segment.Input {
	n := len(sb.times)
	nu := len(sb.userHash)
	ids := string(sb.idBytes) // the users' ids, sliced by userOff
	id := func(u uint32) string { return ids[sb.userOff[u]:sb.userOff[u+1]] }
	// Rank users by (hash, id).
	order := resize(bt.order, nu)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		if c := cmp.Compare(sb.userHash[a], sb.userHash[b]); c != 0 {
			return c
		}
		return strings.Compare(id(a), id(b))
	})
	rank := resize(bt.rank, nu)
	for r, u := range order {
		rank[u] = uint32(r)
	}
	// Counting sort of rows by user rank (stable: keeps arrival order).
	start := resize(bt.start, nu+1)
	clear(start)
	for _, u := range sb.rowUser {
		start[rank[u]+1]++
	}
	for i := 1; i <= nu; i++ {
		start[i] += start[i-1]
	}
	perm := resize(bt.perm, n)
	fill := append(bt.fill[:0], start[:nu]...)
	for row, u := range sb.rowUser {
		r := rank[u]
		perm[fill[r]] = uint32(row)
		fill[r]++
	}
	// Within each user, order by time; stable keeps arrival order for ties.
	for r := 0; r < nu; r++ {
		rows := perm[start[r]:start[r+1]]
		if !slices.IsSortedFunc(rows, func(a, b uint32) int { return cmp.Compare(sb.times[a], sb.times[b]) }) {
			slices.SortStableFunc(rows, func(a, b uint32) int { return cmp.Compare(sb.times[a], sb.times[b]) })
		}
	}
	bt.order, bt.rank, bt.start, bt.perm, bt.fill = order, rank, start, perm, fill
	if d.insertID >= 0 && d.insertID < len(sb.props) && sb.props[d.insertID].len() > 0 {
		if dropped := sb.dedup(d.insertID, bt); dropped > 0 {
			bt.dropped += dropped
			perm, start = bt.perm, bt.start
		}
	}
	all := n // arrival rows; n becomes the rows kept
	n = len(perm)

	in := &bt.in
	in.Users = resize(in.Users, nu)
	in.Times = resize(in.Times, n)
	in.Events = resize(in.Events, n)
	for r, u := range order {
		in.Users[r] = segment.User{Hash: sb.userHash[u], ID: id(u), Rows: int(start[r+1] - start[r])}
	}
	for i, row := range perm {
		in.Times[i] = sb.times[row]
		in.Events[i] = sb.events[row]
	}
	in.EventNames = d.eventNames

	// inv maps an arrival row to its sorted position (dropRow for a
	// duplicate), for scattering props.
	inv := resize(bt.inv, all)
	if n < all {
		for i := range inv {
			inv[i] = dropRow
		}
	}
	for i, row := range perm {
		inv[row] = uint32(i)
	}
	bt.inv = inv
	words := (n + 63) / 64
	in.Props = in.Props[:0]
	for pi := range sb.props {
		sp := &sb.props[pi]
		if sp.len() == 0 {
			continue
		}
		info := &d.props[pi]
		k := len(in.Props)
		if k == len(bt.cols) {
			bt.cols = append(bt.cols, segment.PropColumn{})
		}
		buf := &bt.cols[k]
		buf.Present = resize(buf.Present, words)
		col := segment.PropColumn{Name: info.name, Type: info.typ, Present: buf.Present}
		switch info.typ {
		case event.TypeFloat:
			buf.Floats = resize(buf.Floats, n)
			col.Floats = buf.Floats
		case event.TypeString:
			buf.Strs = resize(buf.Strs, n)
			col.Strs, col.Dict = buf.Strs, info.strs
			if pi == d.insertID {
				col.Dict = sb.insertIDs(bt)
			}
		default:
			buf.Ints = resize(buf.Ints, n)
			col.Ints = buf.Ints
		}
		if sp.dense == all && n == all { // set on every row: every bit, every value
			for w := range col.Present {
				col.Present[w] = ^uint64(0)
			}
			if n%64 != 0 {
				col.Present[words-1] = 1<<(n%64) - 1
			}
			for row, v := range sp.floats {
				col.Floats[inv[row]] = v
			}
			for row, v := range sp.codes {
				col.Strs[inv[row]] = v
			}
			for row, v := range sp.ints {
				col.Ints[inv[row]] = v
			}
		} else {
			clear(col.Present)
			clear(col.Floats)
			clear(col.Strs)
			clear(col.Ints)
			for j, v := range sp.floats {
				if pos := inv[sp.row(j)]; pos != dropRow {
					col.Present[pos>>6] |= 1 << (pos & 63)
					col.Floats[pos] = v
				}
			}
			for j, v := range sp.codes {
				if pos := inv[sp.row(j)]; pos != dropRow {
					col.Present[pos>>6] |= 1 << (pos & 63)
					col.Strs[pos] = v
				}
			}
			for j, v := range sp.ints {
				if pos := inv[sp.row(j)]; pos != dropRow {
					col.Present[pos>>6] |= 1 << (pos & 63)
					col.Ints[pos] = v
				}
			}
		}
		in.Props = append(in.Props, col)
	}
	slices.SortFunc(in.Props, func(a, b segment.PropColumn) int { return strings.Compare(a.Name, b.Name) })
	return in
}

// insertIDs returns the buffer's insert ids by code: one string copy of
// the buffer's bytes, sliced, in bt's memory.
func (sb *shardBuf) insertIDs(bt *builder) []string {
	all := string(sb.iids)
	dict := resize(bt.iidDict, max(len(sb.iidOff)-1, 0))
	for k := range dict {
		dict[k] = all[sb.iidOff[k]:sb.iidOff[k+1]]
	}
	bt.iidDict = dict
	return dict
}

// dropRow marks, in builder.inv, an arrival row dropped as a duplicate.
const dropRow = ^uint32(0)

// dedup drops duplicate events from the sorted rows (bt.perm, user row
// ranges in bt.start): of the rows of one user with equal timestamp,
// event code and insert id (importer property pi), all but the
// first in arrival order (docs/ingest.md §3, Mixpanel's rule: the first
// stored wins). Rows without an insert id are never dropped. Only rows
// with equal times can be duplicates, and the sort put them together, so
// this is a pass over the tie groups. It compacts bt.perm and bt.start
// and returns the number dropped.
func (sb *shardBuf) dedup(pi int, bt *builder) int64 {
	n := len(sb.times)
	iid := resize(bt.iid, n)
	clear(iid)
	sp := &sb.props[pi]
	for j, code := range sp.codes {
		iid[sp.row(j)] = code + 1
	}
	bt.iid = iid
	perm, start := bt.perm, bt.start
	nu := len(start) - 1
	w := 0
	var dropped int64
	for u := range nu {
		s, e := int(start[u]), int(start[u+1])
		start[u] = int32(w)
		for i := s; i < e; {
			j := i + 1
			for j < e && sb.times[perm[j]] == sb.times[perm[i]] {
				j++
			}
			g := w
			if j-i > 32 {
				if bt.seen == nil {
					bt.seen = map[iidKey]struct{}{}
				}
				clear(bt.seen)
			}
			for k := i; k < j; k++ {
				row := perm[k]
				if iid[row] != 0 && sb.seenBefore(perm[g:w], row, iid, bt, j-i) {
					dropped++
					continue
				}
				perm[w] = row
				w++
			}
			i = j
		}
	}
	start[nu] = int32(w)
	bt.perm = perm[:w]
	return dropped
}

// seenBefore reports whether row duplicates a row of kept (the rows kept
// so far of its tie group, of size g): same event code and insert id.
// Large groups use a set (cleared by dedup at each group).
func (sb *shardBuf) seenBefore(kept []uint32, row uint32, iid []uint32, bt *builder, g int) bool {
	id := sb.insertID(iid[row] - 1)
	if g <= 32 {
		for _, k := range kept {
			if iid[k] != 0 && sb.events[k] == sb.events[row] && string(sb.insertID(iid[k]-1)) == string(id) {
				return true
			}
		}
		return false
	}
	key := iidKey{sb.events[row], string(id)}
	if _, ok := bt.seen[key]; ok {
		return true
	}
	bt.seen[key] = struct{}{}
	return false
}

// iidKey is an event of a large tie group in dedup's set: its event code
// and insert id.
type iidKey struct {
	event uint32
	id    string
}
