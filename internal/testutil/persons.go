package testutil

import (
	"slices"

	"github.com/spurdb/spur/identity"
)

// NaivePersons is a deliberately naive id graph after docs/identity.md §2, the
// reference the identity package is tested against: a map from id to
// person number, relabelled in full on every merge, and the log of
// recorded ops, from which person ids are found by a scan. It costs
// O(ids) per op; use it on small inputs only. The zero value is empty.
type NaivePersons struct {
	person     map[string]int // id → person number
	identified map[int]bool   // person number → identified
	log        []naiveRecord  // recorded ops
	refused    int
	next       int
}

// naiveRecord is one recorded op: marked says it marked T identified,
// joined that it joined two persons.
type naiveRecord struct {
	t              string
	marked, joined bool
}

// Apply applies op; it returns the outcome docs/analytics.md §2 gives.
func (n *NaivePersons) Apply(op identity.Op) identity.Outcome {
	if n.person == nil {
		n.person, n.identified = map[string]int{}, map[int]bool{}
	}
	pt, okt := n.person[op.T]
	po, oko := n.person[op.O]
	same := op.T == op.O || okt && oko && pt == po
	idT, idO := okt && n.identified[pt], oko && n.identified[po]
	var out identity.Outcome
	switch {
	case op.Kind == identity.Merge && same:
		return identity.Noop
	case same:
		if idT {
			return identity.Noop
		}
		out = identity.Marked
	case op.Kind == identity.Merge,
		op.Kind == identity.Identify && !idO,
		op.Kind == identity.Alias && !(idT && idO):
		out = identity.Merged
	default:
		out = identity.Refused
		n.refused++
	}
	for _, id := range []string{op.T, op.O} {
		if _, ok := n.person[id]; !ok && (id == op.T || out == identity.Merged) {
			n.next++
			n.person[id] = n.next
		}
	}
	pt, po = n.person[op.T], n.person[op.O]
	marks := op.Kind != identity.Merge
	if out == identity.Merged {
		for id, p := range n.person {
			if p == po {
				n.person[id] = pt
			}
		}
		n.identified[pt] = n.identified[pt] || n.identified[po]
	}
	if marks {
		n.identified[pt] = true
	}
	n.log = append(n.log, naiveRecord{t: op.T, marked: marks, joined: out == identity.Merged})
	return out
}

// PersonOf returns id's person id and its sorted ids (docs/identity.md §1):
// the T of the first recorded op that marked one of the person's ids
// identified, else of the first that joined two of them, else id itself
// (which is then the only id).
func (n *NaivePersons) PersonOf(id string) (personID string, ids []string) {
	p, ok := n.person[id]
	if !ok {
		return id, []string{id}
	}
	for x, q := range n.person {
		if q == p {
			ids = append(ids, x)
		}
	}
	slices.Sort(ids)
	personID = ids[0]
	for _, want := range []func(naiveRecord) bool{
		func(r naiveRecord) bool { return r.marked },
		func(r naiveRecord) bool { return r.joined },
	} {
		for _, r := range n.log {
			if want(r) && n.person[r.t] == p {
				return r.t, ids
			}
		}
	}
	return personID, ids
}

// Identified reports whether id's person is identified.
func (n *NaivePersons) Identified(id string) bool {
	p, ok := n.person[id]
	return ok && n.identified[p]
}

// Known reports whether some recorded op named id.
func (n *NaivePersons) Known(id string) bool {
	_, ok := n.person[id]
	return ok
}

// Refused returns the number of refused ops so far.
func (n *NaivePersons) Refused() int { return n.refused }

// Recorded returns the number of recorded (non-Noop) ops so far.
func (n *NaivePersons) Recorded() int { return len(n.log) }
