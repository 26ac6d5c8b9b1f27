// Package identity is one app's id graph (docs docs/identity.md §1, §2, §4):
// which distinct ids are one person, which persons are identified, and
// each person's person id, built from a sequence of identity operations.
//
// # Rules
//
// With P(x) the person of id x (a fresh singleton when x was never named
// by a recorded op):
//
//   - identify(T, T): marks P(T) identified (Marked; Noop if it already is).
//   - identify(T, A), T ≠ A: if P(A) = P(T), as identify(T, T). Else, if
//     P(A) is not identified, the two persons merge and P(T) is marked
//     identified (Merged); otherwise nothing merges, P(T) is still marked
//     identified, and the refusal is listed (Refused).
//   - alias(T, O): if P(T) = P(O) (or T = O), as identify(T, T). Else, if
//     at most one of P(T) and P(O) is identified, they merge and P(T) is
//     marked identified (Merged); otherwise nothing merges, P(T) is still
//     marked identified, and the refusal is listed (Refused).
//   - merge(T, O): the persons merge (Merged; Noop when they are one
//     already, or T = O). It marks nothing identified.
//
// A Noop changes nothing and is not recorded; every other outcome is a
// recorded op, numbered from 1 (its seq). The graph is a pure function of
// the sequence of recorded ops (RecordedOps, AppendOp, Replay).
//
// # Person id
//
// After docs/identity.md §1: a person's id is its first identified distinct id
// — the T of the earliest recorded op that marked one of its ids
// identified (Marked, Refused, or an identify/alias that Merged) — else
// the T of the earliest recorded op that joined two of its ids (Merged),
// else its only id. When two persons merge, each of the two "earliest"
// is the earlier of the two persons' (and the merging op's own).
//
// # Costs
//
// An id never named by a recorded op is not in the graph (it costs
// nothing; Lookup answers nil). Ids map to a person key in a persistent
// hash trie keyed by the id's xxhash64 (idIndex), keys to *Person in a
// persistent array (table); a Bloom filter of the ids of joined persons
// (MayBeJoined) answers most scans' question in one memory read;
// merges go by size (the smaller person's ids are re-pointed to the larger
// person's key), so n ops re-point O(n log n) ids. A person changed by an
// Apply call gets one new *Person at the end of the call, whose sorted
// DistinctIDs costs O(size) to build: a person that grows in many calls
// costs O(size) per call (batch the ops of a request or a replay).
//
// Measured (2-core shared machine): an Apply of only Noops takes ~110 ns
// and allocates nothing (no snapshot is published); Lookup ~0.3 µs in a
// graph of 1M ids (a few cache misses), never allocating; replaying 208k
// identify operations (416k ids) ~0.8 s (1.8 s with a radix tree). The
// heap holds ~263 bytes per id (BenchmarkMemory, 1M ids).
//
// # Snapshots
//
// Apply serialises writers with a mutex and publishes one new Snapshot
// per call (one copy-on-write generation). A Snapshot is immutable: what it
// answers never changes, whatever is applied later, and readers use it
// without locks.
package identity

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"
)

// MaxIDBytes is the longest distinct id, in bytes: docs/analytics.md §1's
// user_id limit (event.MaxUserIDBytes), which docs/identity.md §1 applies to
// distinct ids.
const MaxIDBytes = 256

// MaxRefusals is how many of the most recent refusals a Snapshot lists.
const MaxRefusals = 1000

// Kind is the kind of an identity operation (docs/identity.md §2).
type Kind uint8

// The operation kinds; the values are part of the encoding (AppendOp).
const (
	Identify Kind = 1 + iota // identify(T, A): T the account, A (in O) the anonymous id
	Alias                    // alias(T, O), symmetric
	Merge                    // merge(T, O), forced
)

// String returns "identify", "alias", "merge" or "kind(N)".
func (k Kind) String() string { return name(kindNames[:], uint8(k), "kind") }

var kindNames = [...]string{Identify: "identify", Alias: "alias", Merge: "merge"}

// name returns names[v], or what(v) when that is missing.
func name(names []string, v uint8, what string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, v)
}

// Op is one identity operation (docs/identity.md §2). T and O are distinct ids
// (for Identify, O is the anonymous id A; O = T is identify(T, T)). Time
// is the UTC µs of the event that carried it: it is kept for the refusal
// list and does not change what the op does.
type Op struct {
	Kind Kind
	T, O string
	Time int64
}

// Validate reports whether o can be applied: a known Kind and T and O
// non-empty valid UTF-8 of at most MaxIDBytes bytes. The error names the
// rule broken and the field.
func (o Op) Validate() error {
	if o.Kind < Identify || o.Kind > Merge {
		return fmt.Errorf("identity: unknown operation kind %d", uint8(o.Kind))
	}
	if err := validID(o.T); err != nil {
		return fmt.Errorf("identity: %v T: %w", o.Kind, err)
	}
	if err := validID(o.O); err != nil {
		return fmt.Errorf("identity: %v O: %w", o.Kind, err)
	}
	return nil
}

// validID checks a distinct id against docs/analytics.md §1's user_id rules.
func validID(id string) error {
	switch {
	case id == "":
		return errors.New("empty id")
	case len(id) > MaxIDBytes:
		return fmt.Errorf("id is %d bytes long (at most %d)", len(id), MaxIDBytes)
	case !utf8.ValidString(id):
		return errors.New("id is not valid UTF-8")
	}
	return nil
}

// Outcome is what applying one Op did.
type Outcome uint8

// The outcomes. Every outcome but Noop is recorded.
const (
	// Noop: the ids are one person already and T's person is identified
	// already (or merge of one person): nothing changes, nothing recorded.
	Noop Outcome = iota
	// Merged: two persons became one.
	Merged
	// Marked: only marked T's person identified (identify(T, T), or the
	// ids were one person whose T was not identified yet).
	Marked
	// Refused: docs/analytics.md §2 forbids the merge: nothing merges, T's person is still
	// marked identified, and the refusal is listed.
	Refused
)

// String returns "noop", "merged", "marked", "refused" or "outcome(N)".
func (o Outcome) String() string { return name(outcomeNames[:], uint8(o), "outcome") }

var outcomeNames = [...]string{Noop: "noop", Merged: "merged", Marked: "marked", Refused: "refused"}

// Person is one person of the graph. It is an immutable value shared by
// snapshots: callers must not modify it or its DistinctIDs.
type Person struct {
	// Key is the person's stable internal key: when two persons merge, the
	// key of the one with more ids survives (ties: the smaller key). Keys
	// are given from 1 in the order ids first enter the graph.
	Key uint32
	// ID is the person id (see the package doc).
	ID string
	// DistinctIDs are all of its ids, sorted by bytes (≥ 1). Rebuilt
	// (O(len)) by every Apply call that adds ids to the person; shared by
	// the Persons of calls that do not.
	DistinctIDs []string
	// Identified: one of its ids was T of an identify or alias op that
	// was recorded.
	Identified bool

	// identSeq is the seq of the earliest op that marked it identified,
	// joinSeq of the earliest that joined two of its ids (0: none). ID is
	// the T of the op identSeq names, else of the op joinSeq names: an
	// identified person stays identified, so one string serves both.
	identSeq, joinSeq uint64
}

// Refusal is a refused op: Seq is its 1-based number among recorded ops,
// Reason says which person (by person id) was identified.
type Refusal struct {
	Seq    uint64
	Op     Op
	Reason string
}

// Stats are a Snapshot's sizes.
type Stats struct {
	Ids         uint64 // distinct ids in the graph
	Persons     uint64 // persons in the graph
	Joined      uint64 // persons with ≥ 2 ids
	Refused     uint64 // refusals so far
	Recorded    uint64 // recorded ops so far
	MemoryBytes uint64 // approximate heap held by the graph's ids, persons and recorded ops, in bytes
}

// Snapshot is an immutable view of the graph after some number of
// recorded ops; safe for concurrent use.
type Snapshot struct {
	ids      idIndex
	filter   *joinFilter // nil: no joined person
	persons  table
	stats    Stats
	refusals []Refusal
}

// Lookup returns the person of id, or nil when no recorded op named id
// (a person of its own whose person id is id itself). No allocation.
func (s *Snapshot) Lookup(id []byte) *Person {
	if s.ids.root == nil {
		return nil
	}
	return s.LookupHash(hashID(id), id)
}

// LookupHash is Lookup for an id whose xxhash64 (storage.UserHash) the
// caller has already: h must be that hash. No allocation.
func (s *Snapshot) LookupHash(h uint64, id []byte) *Person {
	k, _, ok := s.ids.get(h, id)
	if !ok {
		return nil
	}
	return s.persons.get(k)
}

// LookupString is Lookup for a string id. No allocation.
func (s *Snapshot) LookupString(id string) *Person {
	return s.Lookup(unsafe.Slice(unsafe.StringData(id), len(id)))
}

// MayBeJoined reports whether the id whose xxhash64 (storage.UserHash)
// is h may be in a person of two or more ids: false means Lookup answers
// nil or a person of one id. One or two memory reads; a few percent of
// false positives. No allocation.
func (s *Snapshot) MayBeJoined(h uint64) bool { return s.filter != nil && s.filter.may(h) }

// Noop reports whether op changes nothing on s — its ids are one person
// already (or T = O) and, unless it is a merge, that person is identified
// — and so on every later snapshot too, since persons never split and
// stay identified: a writer may drop it before logging it. No allocation.
func (s *Snapshot) Noop(op Op) bool {
	if op.Kind == Merge && op.T == op.O {
		return true
	}
	pt := s.LookupString(op.T)
	if pt == nil || op.T != op.O && s.LookupString(op.O) != pt {
		return false
	}
	return op.Kind == Merge || pt.Identified
}

// Joined reports whether some person has ≥ 2 distinct ids.
func (s *Snapshot) Joined() bool { return s.stats.Joined > 0 }

// Recorded returns the number of recorded ops (Merged, Marked, Refused).
func (s *Snapshot) Recorded() uint64 { return s.stats.Recorded }

// Refused returns the number of refusals so far.
func (s *Snapshot) Refused() uint64 { return s.stats.Refused }

// Refusals returns the most recent MaxRefusals refusals, oldest first.
// The slice is shared: the caller must not modify it.
func (s *Snapshot) Refusals() []Refusal { return s.refusals[:len(s.refusals):len(s.refusals)] }

// Persons calls yield with every person of the graph (each has ≥ 2 ids or
// is identified), once each, in key order, until yield returns false.
func (s *Snapshot) Persons(yield func(*Person) bool) { s.persons.each(yield) }

// Stats returns the snapshot's sizes.
func (s *Snapshot) Stats() Stats { return s.stats }

// Graph is one app's id graph. Apply is safe for concurrent use (a mutex
// serialises writers); Snapshot is lock-free and O(1).
type Graph struct {
	mu      sync.Mutex
	snap    atomic.Pointer[Snapshot]
	ops     []Op   // recorded ops, under mu
	nextKey uint32 // last key given, under mu
	gen     uint64 // table generation of the last Apply, under mu
	idBytes uint64 // bytes of the ids' strings, under mu
	filter  *joinFilter
}

// New returns an empty graph.
func New() *Graph {
	g := &Graph{}
	g.snap.Store(&Snapshot{})
	return g
}

// Snapshot returns the latest published snapshot. O(1), lock-free.
func (g *Graph) Snapshot() *Snapshot { return g.snap.Load() }

// RecordedOps returns a copy of the recorded ops with 0-based index in
// [from, to), clamped to the ops recorded so far; the caller owns it.
func (g *Graph) RecordedOps(from, to uint64) []Op {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := uint64(len(g.ops))
	to = min(to, n)
	if from >= to {
		return nil
	}
	return slices.Clone(g.ops[from:to])
}

// work is a person being changed by an Apply call: p is its new *Person
// (mutable until the call publishes it), base the sorted ids of its
// published version (shared), added the ids it gained in this call.
type work struct {
	p     *Person
	base  []string
	added []string
}

func (w *work) size() int { return len(w.base) + len(w.added) }

// txn is the state of one Apply call.
type txn struct {
	g     *Graph
	old   *Snapshot
	ids   idIndex // the index as the transaction left it (generation g.gen+1)
	dirty map[uint32]*work
	dead  []uint32
	stats Stats
	refs  []Refusal
}

// Apply applies ops in order (see the package doc) and publishes one new
// snapshot at the end. outcomes, if non-nil, must have len(ops) and
// receives each op's Outcome. An invalid op (Validate) or a wrong
// outcomes length is an error before anything is applied. ops is not
// retained (ids are copied).
func (g *Graph) Apply(ops []Op, outcomes []Outcome) error {
	if outcomes != nil && len(outcomes) != len(ops) {
		return fmt.Errorf("identity: Apply: %d outcomes for %d ops", len(outcomes), len(ops))
	}
	for i, op := range ops {
		if err := op.Validate(); err != nil {
			return fmt.Errorf("identity: Apply: op %d: %w", i, err)
		}
	}
	if len(ops) == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := g.snap.Load()
	t := txn{g: g, old: old, stats: old.stats, ids: old.ids}
	for i, op := range ops {
		out := t.apply(op)
		if outcomes != nil {
			outcomes[i] = out
		}
	}
	if t.stats.Recorded != old.stats.Recorded {
		// Only Noops change nothing: the published snapshot stays.
		g.snap.Store(t.commit())
	}
	return nil
}

// person returns the work of the person of key k, making it if needed.
func (t *txn) person(k uint32) *work {
	if w := t.dirty[k]; w != nil {
		return w
	}
	old := t.old.persons.get(k)
	np := *old
	w := &work{p: &np, base: old.DistinctIDs}
	if t.dirty == nil {
		t.dirty = make(map[uint32]*work)
	}
	t.dirty[k] = w
	return w
}

// lookup returns the key of id's person in the transaction, 0 if none.
func (t *txn) lookup(id string) uint32 {
	b := unsafe.Slice(unsafe.StringData(id), len(id))
	k, _, _ := t.ids.get(hashID(b), b)
	return k
}

// insert points id (the graph's copy) to key k.
func (t *txn) insert(id string, k uint32) {
	b := unsafe.Slice(unsafe.StringData(id), len(id))
	t.ids.set(t.g.gen+1, hashID(b), id, k)
}

// identified reports whether the person of key k (0: an unknown id) is
// identified in the transaction.
func (t *txn) identified(k uint32) bool {
	if k == 0 {
		return false
	}
	if w := t.dirty[k]; w != nil {
		return w.p.Identified
	}
	return t.old.persons.get(k).Identified
}

// personID returns the person id of id's person (key k, 0: unknown).
func (t *txn) personID(k uint32, id string) string {
	if k == 0 {
		return id
	}
	if w := t.dirty[k]; w != nil {
		return currentID(w.p, w.base, w.added)
	}
	return t.old.persons.get(k).ID
}

// currentID is the person id of p with ids base ∪ added.
func currentID(p *Person, base, added []string) string {
	switch {
	case p.identSeq > 0 || p.joinSeq > 0:
		return p.ID
	case len(base) > 0:
		return base[0]
	}
	return added[0]
}

// add puts a new id into the graph as a person of its own and returns its
// key. The id's string is copied.
func (t *txn) add(id string) uint32 {
	t.g.nextKey++
	k := t.g.nextKey
	id = strings.Clone(id)
	t.insert(id, k)
	if t.dirty == nil {
		t.dirty = make(map[uint32]*work)
	}
	t.dirty[k] = &work{p: &Person{Key: k}, added: []string{id}}
	t.stats.Ids++
	t.stats.Persons++
	t.g.idBytes += uint64(len(id))
	return k
}

// ensure returns k, or the key of id added to the graph if k is 0.
func (t *txn) ensure(k uint32, id string) uint32 {
	if k == 0 {
		return t.add(id)
	}
	return k
}

// mark marks the person of key k identified by the op of seq whose T is
// tid (a no-op when it is already).
func (t *txn) mark(k uint32, seq uint64, tid string) {
	if t.identified(k) {
		return
	}
	w := t.person(k)
	w.p.Identified = true
	w.p.identSeq, w.p.ID = seq, tid
}

// canonical returns the graph's copy of id (which is in the graph), so
// that recorded ops share the ids' memory with the index's entries.
func (t *txn) canonical(id string) string {
	b := unsafe.Slice(unsafe.StringData(id), len(id))
	if _, c, ok := t.ids.get(hashID(b), b); ok {
		return c
	}
	return id
}

// apply applies one op.
func (t *txn) apply(op Op) Outcome {
	kt, ko := t.lookup(op.T), t.lookup(op.O)
	seq := t.stats.Recorded + 1
	same := op.T == op.O || kt != 0 && kt == ko
	var out Outcome
	switch {
	case op.Kind == Merge && same:
		return Noop
	case same:
		if t.identified(kt) {
			return Noop
		}
		kt = t.ensure(kt, op.T)
		t.mark(kt, seq, op.T)
		out = Marked
	case op.Kind == Merge:
		t.join(t.ensure(kt, op.T), t.ensure(ko, op.O), seq, op.T)
		out = Merged
	default:
		it, io := t.identified(kt), t.identified(ko)
		var reason string
		if op.Kind == Identify && io {
			reason = fmt.Sprintf("A %q is in person %q, which is identified", op.O, t.personID(ko, op.O))
		} else if op.Kind == Alias && it && io {
			reason = fmt.Sprintf("both persons are identified: T %q is in person %q, O %q in person %q",
				op.T, t.personID(kt, op.T), op.O, t.personID(ko, op.O))
		}
		kt = t.ensure(kt, op.T)
		if reason != "" {
			t.mark(kt, seq, op.T)
			t.refuse(Refusal{Seq: seq, Op: t.record(op), Reason: reason})
			return Refused
		} else {
			ko = t.ensure(ko, op.O)
			t.mark(kt, seq, op.T)
			t.join(kt, ko, seq, op.T)
			out = Merged
		}
	}
	t.record(op)
	return out
}

// record appends op, with the graph's copies of its ids, to the recorded
// ops and returns that copy.
func (t *txn) record(op Op) Op {
	op.T, op.O = t.canonical(op.T), t.canonical(op.O)
	t.g.ops = append(t.g.ops, op)
	t.stats.Recorded++
	return op
}

// refuse lists r, keeping the most recent MaxRefusals.
func (t *txn) refuse(r Refusal) {
	t.stats.Refused++
	if t.refs == nil {
		t.refs = t.old.refusals
	}
	if len(t.refs) >= 2*MaxRefusals {
		t.refs = slices.Clone(t.refs[len(t.refs)-MaxRefusals+1:])
	}
	// Appending past the end of the published slice never changes what
	// older snapshots see: they hold a shorter length.
	t.refs = append(t.refs, r)
}

// join merges the persons of keys a and b (distinct) by the op of seq
// whose T is tid: the larger (ties: the smaller key) keeps its key and
// gains the other's ids, which are re-pointed to it.
func (t *txn) join(a, b uint32, seq uint64, tid string) {
	wa, wb := t.person(a), t.person(b)
	if wb.size() > wa.size() || wb.size() == wa.size() && b < a {
		a, b, wa, wb = b, a, wb, wa
	}
	for _, w := range [2]*work{wa, wb} {
		if w.size() >= 2 {
			t.stats.Joined--
		}
	}
	t.stats.Joined++
	t.stats.Persons--
	pa, pb := wa.p, wb.p
	if pa.identSeq > 0 || pb.identSeq > 0 {
		// The earliest identified id wins.
		if pb.identSeq > 0 && (pa.identSeq == 0 || pb.identSeq < pa.identSeq) {
			pa.identSeq, pa.ID = pb.identSeq, pb.ID
		}
		pa.Identified = true
	} else {
		// The T of the earliest join wins: theirs, else this op's.
		if pb.joinSeq > 0 && (pa.joinSeq == 0 || pb.joinSeq < pa.joinSeq) {
			pa.ID = pb.ID
		} else if pa.joinSeq == 0 {
			pa.ID = tid
		}
	}
	for _, j := range [2]uint64{pa.joinSeq, pb.joinSeq} {
		if j > 0 {
			seq = min(seq, j)
		}
	}
	pa.joinSeq = seq
	for _, ids := range [2][]string{wb.base, wb.added} {
		for _, id := range ids {
			t.insert(id, a)
			wa.added = append(wa.added, id)
			t.filter(id)
		}
	}
	if wa.size()-len(wb.base)-len(wb.added) == 1 {
		// a was a person of one id: it is joined now.
		for _, ids := range [2][]string{wa.base, wa.added[:len(wa.added)-len(wb.base)-len(wb.added)]} {
			for _, id := range ids {
				t.filter(id)
			}
		}
	}
	delete(t.dirty, b)
	t.dead = append(t.dead, b)
}

// filter adds id, now in a joined person, to the join filter, first
// growing the filter when it is full.
func (t *txn) filter(id string) {
	g := t.g
	if g.filter == nil || g.filter.full() {
		f := newJoinFilter(2 * int(t.stats.Ids))
		// Every id of a joined person so far (those of this call's
		// persons are re-added as they join).
		t.old.persons.each(func(p *Person) bool {
			if len(p.DistinctIDs) >= 2 {
				for _, d := range p.DistinctIDs {
					f.add(hashID(unsafe.Slice(unsafe.StringData(d), len(d))))
				}
			}
			return true
		})
		for _, w := range t.dirty {
			for _, ids := range [2][]string{w.base, w.added} {
				for _, d := range ids {
					f.add(hashID(unsafe.Slice(unsafe.StringData(d), len(d))))
				}
			}
		}
		g.filter = f
	}
	g.filter.add(hashID(unsafe.Slice(unsafe.StringData(id), len(id))))
}

// commit builds the changed persons and returns the new snapshot.
func (t *txn) commit() *Snapshot {
	g := t.g
	g.gen++
	s := &Snapshot{ids: t.ids, persons: t.old.persons, refusals: t.old.refusals, filter: g.filter}
	for _, k := range t.dead {
		if t.dirty[k] == nil && t.old.persons.get(k) != nil {
			s.persons.set(g.gen, k, nil)
		}
	}
	for k, w := range t.dirty {
		p := w.p
		if len(w.added) > 0 {
			slices.Sort(w.added)
			ids := make([]string, 0, w.size())
			i, j := 0, 0
			for i < len(w.base) && j < len(w.added) {
				if w.base[i] < w.added[j] {
					ids = append(ids, w.base[i])
					i++
				} else {
					ids = append(ids, w.added[j])
					j++
				}
			}
			ids = append(ids, w.base[i:]...)
			p.DistinctIDs = append(ids, w.added[j:]...)
		}
		p.ID = currentID(p, p.DistinctIDs, nil)
		s.persons.set(g.gen, k, p)
	}
	if t.refs != nil {
		s.refusals = t.refs
		if len(s.refusals) > MaxRefusals {
			s.refusals = s.refusals[len(s.refusals)-MaxRefusals:]
		}
	}
	t.stats.MemoryBytes = g.idBytes + t.stats.Ids*bytesPerID + t.stats.Persons*bytesPerPerson +
		uint64(cap(g.ops))*uint64(unsafe.Sizeof(Op{}))
	s.stats = t.stats
	return s
}

// bytesPerID and bytesPerPerson approximate the heap an id (index entry
// and its share of the trie's nodes, DistinctIDs entry, filter bits) and
// a person (Person, table slot) hold besides the id's bytes; measured with
// BenchmarkMemory (263 bytes per id in all at 1M ids).
const (
	bytesPerID     = 175
	bytesPerPerson = 100
)
