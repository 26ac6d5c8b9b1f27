// Package userfold is the exact fold of one user property's writes
// (docs/identity.md §3, /work/shared/spec/identity.md §3): the writes are
// ordered by (time, rank) and applied in that order — a set replaces the
// value, a set-once sets it only when it is unset at that moment, an
// unset or a delete clears it, and an add adds to a number (starting from
// zero when the property is unset). Equal writes give equal values
// whatever order they come in, which is what makes the answers of the
// scan, the persons join and the person page independent of arrival.
//
// The package holds no state and allocates nothing: callers collect a
// user's (or a person's) writes of one property into a scratch slice they
// reuse and call Fold on it.
package userfold

import (
	"cmp"
	"slices"
	"strconv"
)

// Op is the operation of a user property write.
type Op uint8

// The operations, in the numbering the live record uses for its user
// writes (storage's record version 3; 0 and 1 are version 2's once flag).
const (
	// Set replaces the property's value.
	Set Op = iota
	// SetOnce sets the property only when it is unset at the write's time.
	SetOnce
	// Unset clears the property.
	Unset
	// Add adds the write's number to the property's value, from zero when
	// it is unset; when the value is not a number the add is ignored.
	Add
	// Delete clears every property of the user (Mixpanel's $delete); for
	// one property it is Unset. A caller expands it to every property it
	// folds.
	Delete
	// NumOps is the number of operations: a valid Op is below it.
	NumOps
)

var opNames = [NumOps]string{"set", "set_once", "unset", "add", "delete"}

// String returns the operation's name ("set", "set_once", "unset", "add",
// "delete"), or "op(N)" for an invalid one.
func (o Op) String() string {
	if o < NumOps {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Clears reports whether o ends the property's value whatever it was
// (Set, Unset, Delete): the writes before the last such write of a
// property do not matter.
func (o Op) Clears() bool { return o == Set || o == Unset || o == Delete }

// Simple reports whether o is one of the operations a fold of latest-set
// else earliest-set-once handles exactly (Set, SetOnce): a user with
// only such writes needs no sort.
func (o Op) Simple() bool { return o == Set || o == SetOnce }

// Write is one write of one property. Time is its timestamp (UTC µs);
// Rank orders writes of equal Time (the arrival order within one distinct
// id, or the distinct id's order between the ids of one person): the
// greater Rank applies later. Value is the value of a Set or SetOnce, the
// number of an Add, and is ignored for Unset and Delete.
type Write[V any] struct {
	Time  int64
	Rank  int64
	Op    Op
	Value V
}

// Fold sorts ws in place by (Time, Rank) — stably, so writes with equal
// keys apply in slice order — and returns the property's value after
// applying them in that order, set false when it ends unset. add returns
// cur+delta, or ok false when cur is not a number (the add is then
// ignored); it is called only when the property holds a value (an add to
// an unset property gives delta). Fold allocates nothing and keeps no
// reference to ws.
func Fold[V any](ws []Write[V], add func(cur, delta V) (sum V, ok bool)) (val V, set bool) {
	slices.SortStableFunc(ws, func(a, b Write[V]) int {
		if c := cmp.Compare(a.Time, b.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Rank, b.Rank)
	})
	// Only the writes from the last clearing one on matter.
	from := 0
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].Op.Clears() {
			from = i
			break
		}
	}
	var zero V
	for _, w := range ws[from:] {
		switch w.Op {
		case Set:
			val, set = w.Value, true
		case SetOnce:
			if !set {
				val, set = w.Value, true
			}
		case Unset, Delete:
			val, set = zero, false
		case Add:
			if !set {
				val, set = w.Value, true
			} else if s, ok := add(val, w.Value); ok {
				val = s
			}
		}
	}
	return val, set
}
