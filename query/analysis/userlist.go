package analysis

import (
	"container/heap"
	"fmt"
	"slices"
)

// MaxListKeep bounds UserList's kept ids (offset + limit of a page).
const MaxListKeep = 1_000_000

// UserList counts the users added to it and keeps the Keep smallest user
// ids (byte order), so that the page [offset, offset+limit) of the sorted
// list is exact with Keep = offset + limit, in memory bounded by Keep ids.
// Merging lists of disjoint user sets (users of different shards) is exact
// and order-independent (docs/analytics.md §8). The zero value counts without keeping.
type UserList struct {
	Keep int // ids to keep, 0 ≤ Keep ≤ MaxListKeep
	n    int64
	ids  maxHeap
	size int64 // bytes of kept ids
}

// Add counts a user and keeps a copy of id if it is among the Keep
// smallest. id is borrowed. It allocates only when it keeps the id.
func (l *UserList) Add(id []byte) {
	l.n++
	if l.Keep == 0 {
		return
	}
	if len(l.ids) < l.Keep {
		s := string(id)
		l.size += int64(len(s)) + 16
		heap.Push(&l.ids, s)
		return
	}
	if string(id) < l.ids[0] {
		l.size += int64(len(id)) - int64(len(l.ids[0]))
		l.ids[0] = string(id)
		heap.Fix(&l.ids, 0)
	}
}

// Merge adds the users of o (a list of other users, with the same Keep)
// into l. o is not modified. Another Keep is an error wrapping ErrState,
// and l is left unchanged.
func (l *UserList) Merge(o *UserList) error {
	if o.Keep != l.Keep {
		return fmt.Errorf("%w: user list: merge of lists keeping %d and %d ids", ErrState, l.Keep, o.Keep)
	}
	l.n += o.n
	for _, s := range o.ids {
		if len(l.ids) < l.Keep {
			l.size += int64(len(s)) + 16
			heap.Push(&l.ids, s)
		} else if l.Keep > 0 && s < l.ids[0] {
			l.size += int64(len(s)) - int64(len(l.ids[0]))
			l.ids[0] = s
			heap.Fix(&l.ids, 0)
		}
	}
	return nil
}

// Count returns the number of users added (including merged ones).
func (l *UserList) Count() int64 { return l.n }

// Page returns the ids at positions [offset, offset+limit) of the sorted
// list of users, in a newly allocated slice (never nil). Positions beyond
// Keep are not known: offset+limit must be ≤ Keep.
func (l *UserList) Page(offset, limit int) []string {
	all := slices.Clone([]string(l.ids))
	slices.Sort(all)
	if offset >= len(all) {
		return []string{}
	}
	return append([]string{}, all[offset:min(len(all), offset+limit)]...)
}

// Bytes returns the memory held by the kept ids.
func (l *UserList) Bytes() int64 { return l.size }

// maxHeap is a max-heap of strings (container/heap).
type maxHeap []string

func (h maxHeap) Len() int           { return len(h) }
func (h maxHeap) Less(i, j int) bool { return h[i] > h[j] }
func (h maxHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *maxHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *maxHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
