package analysis

import (
	"container/heap"
	"slices"
)

// list writes a user list: Keep, the users counted, the kept ids.
func (e *encoder) list(l *UserList) {
	e.uvarint(uint64(l.Keep))
	e.uvarint(uint64(l.n))
	e.uvarint(uint64(len(l.ids)))
	for _, s := range l.ids {
		e.uvarint(uint64(len(s)))
		e.b = append(e.b, s...)
	}
}

// list reads a user list into l (empty, with its Keep set): the encoded
// Keep must be l's, and it must keep min(users, Keep) ids.
func (d *decoder) list(l *UserList) {
	if keep := d.uvarint(); d.err == nil && keep != uint64(l.Keep) {
		d.fail("list keeps %d ids, want %d", keep, l.Keep)
		return
	}
	l.n = d.count()
	n := d.length(1)
	if d.err != nil {
		return
	}
	if int64(n) != min(l.n, int64(l.Keep)) {
		d.fail("list of %d users keeping %d of %d ids", l.n, n, l.Keep)
		return
	}
	l.ids = make(maxHeap, 0, n)
	for range n {
		s := string(d.bytes())
		l.size += int64(len(s)) + 16
		l.ids = append(l.ids, s)
	}
	if d.err != nil {
		return
	}
	heap.Init(&l.ids)
	// A user is counted once: kept ids are distinct.
	sorted := slices.Clone([]string(l.ids))
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			d.fail("id %q twice", sorted[i])
			return
		}
	}
}

// AppendBinary appends the list's state to dst (the shape of
// encoding.BinaryAppender): the header (version, kind, and Keep as the
// spec fingerprint), the users counted and the kept ids. It never fails.
func (l *UserList) AppendBinary(dst []byte) ([]byte, error) {
	e := encoder{b: dst}
	e.header(kindUserList, uint64(l.Keep))
	e.list(l)
	return e.b, nil
}

// DecodeUserList returns a list keeping keep ids with the state b
// encodes (UserList.AppendBinary). Errors (wrapping ErrState): another
// version, kind or Keep, truncated, trailing or inconsistent input. b is
// not retained.
func DecodeUserList(keep int, b []byte) (*UserList, error) {
	l := &UserList{Keep: keep}
	d := newDecoder(b, nil, "user list")
	d.header(kindUserList, uint64(keep))
	d.list(l)
	if err := d.end(); err != nil {
		return nil, err
	}
	return l, nil
}
