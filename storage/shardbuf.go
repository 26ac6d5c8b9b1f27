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
	userIdx  map[string]uint32
	userIDs  []string
	userHash []uint64
	lastUser string // fast path: consecutive rows of one user skip the map
	lastIdx  uint32

	rowUser []uint32
	times   []int64
	events  []uint32
	props   []sparseProp // by importer prop index
}

type sparseProp struct {
	rows   []uint32
	ints   []int64
	floats []float64
}

func newShardBuf() *shardBuf {
	return &shardBuf{userIdx: map[string]uint32{}}
}

func (sb *shardBuf) addUser(id string, h uint64) {
	if len(sb.rowUser) > 0 && id == sb.lastUser {
		sb.rowUser = append(sb.rowUser, sb.lastIdx)
		return
	}
	i, ok := sb.userIdx[id]
	if !ok {
		i = uint32(len(sb.userIDs))
		id = strings.Clone(id)
		sb.userIdx[id] = i
		sb.userIDs = append(sb.userIDs, id)
		sb.userHash = append(sb.userHash, h)
	}
	sb.lastUser, sb.lastIdx = sb.userIDs[i], i
	sb.rowUser = append(sb.rowUser, i)
}

func (sb *shardBuf) addProp(pi int, row uint32, v event.Value, im *importer) {
	for len(sb.props) <= pi {
		sb.props = append(sb.props, sparseProp{})
	}
	sp := &sb.props[pi]
	sp.rows = append(sp.rows, row)
	switch v.Type {
	case event.TypeFloat:
		sp.floats = append(sp.floats, v.Float)
	case event.TypeString:
		sp.ints = append(sp.ints, int64(im.props[pi].code(v.Str)))
	default: // int, bool, time
		sp.ints = append(sp.ints, v.Int)
	}
}

// build sorts the shard's rows by (user hash, user id, time, arrival) and
// returns them as a segment input with dictionaries compacted to the codes
// this shard uses.
func (sb *shardBuf) build(im *importer) *segment.Input {
	n := len(sb.times)
	nu := len(sb.userIDs)
	// Rank users by (hash, id).
	order := make([]uint32, nu)
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int {
		if c := cmp.Compare(sb.userHash[a], sb.userHash[b]); c != 0 {
			return c
		}
		return strings.Compare(sb.userIDs[a], sb.userIDs[b])
	})
	rank := make([]uint32, nu)
	for r, u := range order {
		rank[u] = uint32(r)
	}
	// Counting sort of rows by user rank (stable: keeps arrival order).
	start := make([]int, nu+1)
	for _, u := range sb.rowUser {
		start[rank[u]+1]++
	}
	for i := 1; i <= nu; i++ {
		start[i] += start[i-1]
	}
	perm := make([]uint32, n)
	fill := slices.Clone(start[:nu])
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

	in := &segment.Input{
		Users:  make([]segment.User, nu),
		Times:  make([]int64, n),
		Events: make([]uint32, n),
	}
	for r, u := range order {
		in.Users[r] = segment.User{Hash: sb.userHash[u], ID: sb.userIDs[u], Rows: start[r+1] - start[r]}
	}
	evMap := newRemap(len(im.eventName))
	for i, row := range perm {
		in.Times[i] = sb.times[row]
		in.Events[i] = evMap.code(sb.events[row])
	}
	in.EventNames = evMap.names(im.eventName)

	// inv maps an arrival row to its sorted position, for scattering props.
	inv := make([]uint32, n)
	for i, row := range perm {
		inv[row] = uint32(i)
	}
	words := (n + 63) / 64
	for pi := range sb.props {
		sp := &sb.props[pi]
		if len(sp.rows) == 0 {
			continue
		}
		info := &im.props[pi]
		col := segment.PropColumn{Name: info.name, Type: info.typ, Present: make([]uint64, words)}
		switch info.typ {
		case event.TypeFloat:
			col.Floats = make([]float64, n)
			for j, row := range sp.rows {
				pos := inv[row]
				col.Present[pos>>6] |= 1 << (pos & 63)
				col.Floats[pos] = sp.floats[j]
			}
		case event.TypeString:
			col.Strs = make([]uint32, n)
			m := newRemap(len(info.strs))
			for j, row := range sp.rows {
				pos := inv[row]
				col.Present[pos>>6] |= 1 << (pos & 63)
				col.Strs[pos] = m.code(uint32(sp.ints[j]))
			}
			col.Dict = m.names(info.strs)
		default:
			col.Ints = make([]int64, n)
			for j, row := range sp.rows {
				pos := inv[row]
				col.Present[pos>>6] |= 1 << (pos & 63)
				col.Ints[pos] = sp.ints[j]
			}
		}
		in.Props = append(in.Props, col)
	}
	slices.SortFunc(in.Props, func(a, b segment.PropColumn) int { return strings.Compare(a.Name, b.Name) })
	return in
}

// remap compacts a dictionary to the codes actually used, in first-use order.
type remap struct {
	to   []uint32 // old code → new code + 1 (0 = unused)
	used []uint32 // new code → old code
}

func newRemap(n int) *remap { return &remap{to: make([]uint32, n)} }

func (m *remap) code(old uint32) uint32 {
	if c := m.to[old]; c != 0 {
		return c - 1
	}
	m.used = append(m.used, old)
	m.to[old] = uint32(len(m.used))
	return uint32(len(m.used) - 1)
}

func (m *remap) names(all []string) []string {
	out := make([]string, len(m.used))
	for i, old := range m.used {
		out[i] = all[old]
	}
	return out
}
