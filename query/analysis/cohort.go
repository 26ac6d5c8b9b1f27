package analysis

import (
	"fmt"
	"sort"

	"github.com/spurdb/spur/trail"
)

// CohortOp is the kind of a cohort condition node (docs/analytics.md §7).
type CohortOp uint8

// Cohort condition nodes.
const (
	CohortAnd            CohortOp = iota // every child holds (true without children)
	CohortOr                             // some child holds
	CohortNot                            // the single child does not hold
	CohortPerformed                      // the count of matching events in [From, To) satisfies Count N
	CohortFirstPerformed                 // the user's first matching event ever lies in [From, To)
	CohortUserFlag                       // bit Flag of the per-user flags is set (user_property)
)

// CountOp compares a performed-condition's event count with N.
type CountOp uint8

// Count operators: count ≥ N, count ≤ N, count = N.
const (
	CountGTE CountOp = iota
	CountLTE
	CountEQ
)

// CohortCond is a compiled cohort condition tree, evaluated per user on
// the user's trail by a CohortState (docs/analytics.md §7: performed, not_performed as performed with
// count = 0, first_performed, user_property; and, or, not).
type CohortCond struct {
	Op   CohortOp
	Kids []CohortCond
	// Bit is the trail mask bit of the matcher of a performed or
	// first_performed node; From and To its window [From, To) in UTC µs.
	Bit      int
	From, To int64
	// Count and N: the performed node's comparison.
	Count CountOp
	N     int64
	// Flag is the bit of a user_property node in the flags given to
	// CohortState.In.
	Flag int
}

// Validate checks the tree's shape: Not has one child, bits and flags are
// in 0..63, windows are not inverted.
func (c *CohortCond) Validate() error {
	switch c.Op {
	case CohortAnd, CohortOr:
	case CohortNot:
		if len(c.Kids) != 1 {
			return fmt.Errorf("analysis: cohort: not with %d children", len(c.Kids))
		}
	case CohortPerformed, CohortFirstPerformed:
		if c.Bit < 0 || c.Bit > 63 || c.From > c.To || c.Count > CountEQ {
			return fmt.Errorf("analysis: cohort: bad performed node (bit %d, window [%d, %d))", c.Bit, c.From, c.To)
		}
	case CohortUserFlag:
		if c.Flag < 0 || c.Flag > 63 {
			return fmt.Errorf("analysis: cohort: user flag %d out of range", c.Flag)
		}
	default:
		return fmt.Errorf("analysis: cohort: unknown node %d", c.Op)
	}
	for i := range c.Kids {
		if err := c.Kids[i].Validate(); err != nil {
			return err
		}
	}
	return nil
}

// CohortState evaluates a cohort condition for one user at a time, over
// a trail that may come in chunks (package trail): Add is called with each
// of the user's chunks in order, then In decides. Its state is one count
// per performed or first_performed node of the tree, whatever the trail's
// length. The trail must hold the user's events for every performed
// window (from all stored data for first_performed), with the nodes' bits
// set. A CohortState is owned by one goroutine; several may share one
// CohortCond.
type CohortState struct {
	nodes  []cohortNode // the tree in preorder
	leaves []cohortLeaf
	// got[i] is the user's state in leaf i: performed: matching events
	// in [from, to) so far; first_performed: 0 before the first matching
	// event, 1 when it lay in [from, to), -1 when it did not.
	got    []int64
	gotBuf [4]int64 // got's memory for up to 4 leaves (no allocation)
}

// cohortNode is a node of the flattened tree.
type cohortNode struct {
	op   CohortOp
	end  int32  // index of the node after this node's subtree
	leaf int32  // performed, first_performed: index into leaves
	flag uint64 // user flag: the node's bit in the flags
}

// cohortLeaf is a performed or first_performed node (its parameters;
// the user's state is CohortState.got).
type cohortLeaf struct {
	first    bool // first_performed
	bit      uint64
	from, to int64
	count    CountOp
	n        int64
}

// NewCohortState returns an evaluator of c, which must be valid
// (Validate). c is not retained.
func NewCohortState(c *CohortCond) *CohortState {
	s := &CohortState{}
	s.flatten(c)
	s.got = s.gotBuf[:0]
	if len(s.leaves) > len(s.gotBuf) {
		s.got = make([]int64, 0, len(s.leaves))
	}
	s.got = s.got[:len(s.leaves)]
	return s
}

func (s *CohortState) flatten(c *CohortCond) {
	i := len(s.nodes)
	s.nodes = append(s.nodes, cohortNode{op: c.Op, leaf: -1})
	switch c.Op {
	case CohortPerformed, CohortFirstPerformed:
		s.nodes[i].leaf = int32(len(s.leaves))
		s.leaves = append(s.leaves, cohortLeaf{first: c.Op == CohortFirstPerformed, bit: 1 << uint(c.Bit),
			from: c.From, to: c.To, count: c.Count, n: c.N})
	case CohortUserFlag:
		s.nodes[i].flag = 1 << uint(c.Flag)
	}
	for k := range c.Kids {
		s.flatten(&c.Kids[k])
	}
	s.nodes[i].end = int32(len(s.nodes))
}

// Add feeds one chunk of the user's trail; a chunk with Offset 0 starts a
// new user. The trail is borrowed only for the call. Cost: O(events) per
// performed node (O(log n) to its window), no allocation.
func (s *CohortState) Add(tr *trail.Trail) {
	times := tr.Times
	masks := tr.Mask[:len(times)]
	for li := range s.leaves {
		lf, got := &s.leaves[li], &s.got[li]
		if tr.Offset == 0 {
			*got = 0
		}
		if lf.first {
			if *got != 0 {
				continue // decided by an earlier chunk
			}
			for i, m := range masks {
				if m&lf.bit != 0 {
					*got = -1
					if t := times[i]; t >= lf.from && t < lf.to {
						*got = 1
					}
					break
				}
			}
			continue
		}
		i := 0
		if len(times) > 0 && times[0] < lf.from {
			from := lf.from
			i = sort.Search(len(times), func(j int) bool { return times[j] >= from })
		}
		n, to, bit := *got, lf.to, lf.bit
		for ; i < len(times) && times[i] < to; i++ {
			if masks[i]&bit != 0 {
				n++
			}
		}
		*got = n
	}
}

// In reports whether the user whose whole trail was fed to Add is in the
// cohort; flags carries the user_property results (bit Flag of a
// CohortUserFlag node). No allocation.
func (s *CohortState) In(flags uint64) bool { return s.eval(0, flags) }

func (s *CohortState) eval(i int, flags uint64) bool {
	nd := &s.nodes[i]
	switch nd.op {
	case CohortAnd:
		for k := i + 1; k < int(nd.end); k = int(s.nodes[k].end) {
			if !s.eval(k, flags) {
				return false
			}
		}
		return true
	case CohortOr:
		for k := i + 1; k < int(nd.end); k = int(s.nodes[k].end) {
			if s.eval(k, flags) {
				return true
			}
		}
		return false
	case CohortNot:
		return !s.eval(i+1, flags)
	case CohortUserFlag:
		return flags&nd.flag != 0
	}
	lf, got := &s.leaves[nd.leaf], s.got[nd.leaf]
	if lf.first {
		return got > 0
	}
	switch lf.count {
	case CountLTE:
		return got <= lf.n
	case CountEQ:
		return got == lf.n
	}
	return got >= lf.n
}
