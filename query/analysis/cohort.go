package analysis

import (
	"fmt"

	"github.com/spurdb/spur/trail"
)

// CohortOp is the kind of a cohort condition node (spec §7).
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
// the user's trail (spec §7: performed, not_performed as performed with
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
	// Flag is the bit of a user_property node in the flags given to Eval.
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

// Eval reports whether the user of tr is in the cohort. tr must hold the
// user's events for every performed window (from all stored data for
// first_performed), with the nodes' bits set; flags carries the
// user_property results. No allocation.
func (c *CohortCond) Eval(tr *trail.Trail, flags uint64) bool {
	switch c.Op {
	case CohortAnd:
		for i := range c.Kids {
			if !c.Kids[i].Eval(tr, flags) {
				return false
			}
		}
		return true
	case CohortOr:
		for i := range c.Kids {
			if c.Kids[i].Eval(tr, flags) {
				return true
			}
		}
		return false
	case CohortNot:
		return !c.Kids[0].Eval(tr, flags)
	case CohortUserFlag:
		return flags>>uint(c.Flag)&1 != 0
	case CohortFirstPerformed:
		bit := uint64(1) << uint(c.Bit)
		for i, m := range tr.Mask[:len(tr.Times)] {
			if m&bit != 0 {
				t := tr.Times[i]
				return t >= c.From && t < c.To
			}
		}
		return false
	}
	bit := uint64(1) << uint(c.Bit)
	var n int64
	for i, t := range tr.Times {
		if t >= c.To {
			break
		}
		if t >= c.From && tr.Mask[i]&bit != 0 {
			n++
		}
	}
	switch c.Count {
	case CountLTE:
		return n <= c.N
	case CountEQ:
		return n == c.N
	}
	return n >= c.N
}
