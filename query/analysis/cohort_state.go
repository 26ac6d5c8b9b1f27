package analysis

// writeSpec writes the canonical form of the condition tree for the
// fingerprint.
func (s *CohortState) writeSpec(e *encoder) {
	e.u8(uint8(kindCohort))
	e.uvarint(uint64(len(s.nodes)))
	for _, nd := range s.nodes {
		e.u8(uint8(nd.op))
		e.varint(int64(nd.end))
		e.uvarint(nd.flag)
		if nd.leaf >= 0 {
			lf := &s.leaves[nd.leaf]
			e.bool(lf.first)
			e.uvarint(lf.bit)
			e.varint(lf.from)
			e.varint(lf.to)
			e.u8(uint8(lf.count))
			e.varint(lf.n)
		}
	}
}

// SpecFingerprint returns the fingerprint of the cohort condition that
// the state's encoding carries.
func (s *CohortState) SpecFingerprint() uint64 { return fingerprint(nil, s.writeSpec) }

// AppendBinary appends the current user's state to dst (the shape of
// encoding.BinaryAppender): the header (version, kind, SpecFingerprint)
// and the user's count per performed node, so that a user's evaluation
// can continue elsewhere with the next chunk of their trail. A cohort
// state is one user's: it does not merge across users. It never fails.
func (s *CohortState) AppendBinary(dst []byte) ([]byte, error) {
	return appendState(dst, nil, kindCohort, s.SpecFingerprint(), func(e *encoder) {
		e.uvarint(uint64(len(s.got)))
		for i, g := range s.got {
			if s.leaves[i].first {
				e.varint(g)
			} else {
				e.uvarint(uint64(g))
			}
		}
	})
}

// DecodeCohortState returns an evaluator of c (valid, see Validate)
// holding the user's state b encodes (CohortState.AppendBinary). Errors
// (wrapping ErrState): another version or kind, a state of another
// condition (fingerprint), truncated, trailing or out-of-range input. b
// is not retained.
func DecodeCohortState(c *CohortCond, b []byte) (*CohortState, error) {
	s := NewCohortState(c)
	return decodeState(s, nil, b, nil, kindCohort, "cohort", func(d *decoder) {
		d.exact(len(s.got), "leaves")
		for i := range s.got {
			if !s.leaves[i].first {
				s.got[i] = d.count()
				continue
			}
			if s.got[i] = d.varint(); s.got[i] < -1 || s.got[i] > 1 {
				d.fail("first_performed state %d", s.got[i])
			}
		}
	})
}
