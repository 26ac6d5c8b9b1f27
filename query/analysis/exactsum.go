package analysis

import (
	"math"
	"math/big"
)

// ExactSum is the exact sum of float64 and int64 values, so that a sum or
// mean does not depend on the order of the additions (docs/analytics.md §8: the same
// answer whatever the parallelism). It is a "superaccumulator" (Kulisch;
// Neal, "Fast exact summation using small and large superaccumulators",
// 2015): a fixed-point integer with unit 2^-1074 (the smallest float64)
// held in 32-bit digits stored in int64 words, so that 2^30 additions fit
// before carries must be propagated. Only the digits between the smallest
// and largest magnitudes seen are allocated (a few words for typical
// data). Infinities are counted apart; NaN cannot be stored by Spur.
//
// The zero value is an empty sum. Add does not allocate once the digit
// window covers the magnitudes of the data.
type ExactSum struct {
	d      []int64 // d[i] weighs 2^(32*(base+i)-1074)
	base   int32
	adds   int32 // additions since the last normalisation
	posInf bool
	negInf bool
}

const (
	exactUnit  = 1074    // bit 0 of the accumulator weighs 2^-1074
	exactFlush = 1 << 30 // normalise after this many additions
)

// AddFloat adds f exactly.
func (s *ExactSum) AddFloat(f float64) {
	b := math.Float64bits(f)
	neg := b>>63 != 0
	e := int(b >> 52 & 0x7ff)
	m := b & (1<<52 - 1)
	switch e {
	case 0x7ff:
		if m == 0 {
			if neg {
				s.negInf = true
			} else {
				s.posInf = true
			}
		}
		return
	case 0: // subnormal: m × 2^-1074
		s.add(m, 0, neg)
	default: // (2^52 + m) × 2^(e-1075)
		s.add(m|1<<52, e-1, neg)
	}
}

// AddInt adds v exactly.
func (s *ExactSum) AddInt(v int64) {
	if v < 0 {
		s.add(uint64(-v), exactUnit, true) // -MinInt64 wraps to 2^63: correct as uint64
	} else {
		s.add(uint64(v), exactUnit, false)
	}
}

// add adds ±mag × 2^(pos-1074).
func (s *ExactSum) add(mag uint64, pos int, neg bool) {
	if mag == 0 {
		return
	}
	idx := int32(pos >> 5)
	sh := uint(pos & 31)
	lo := mag << sh
	hi := mag >> (64 - sh) // 0 when sh == 0 (Go defines x >> 64 = 0)
	s.cover(idx, idx+3)
	i := idx - s.base
	c0, c1, c2 := int64(lo&0xffffffff), int64(lo>>32), int64(hi)
	if neg {
		c0, c1, c2 = -c0, -c1, -c2
	}
	s.d[i] += c0
	s.d[i+1] += c1
	s.d[i+2] += c2
	s.adds++
	if s.adds >= exactFlush {
		s.normalize()
	}
}

// cover grows the digit window to include digits lo..hi.
func (s *ExactSum) cover(lo, hi int32) {
	if len(s.d) == 0 {
		s.d = make([]int64, hi-lo+1, hi-lo+3)
		s.base = lo
		return
	}
	if lo < s.base {
		d := make([]int64, int(s.base-lo)+len(s.d), int(s.base-lo)+len(s.d)+2)
		copy(d[s.base-lo:], s.d)
		s.d, s.base = d, lo
	}
	if top := s.base + int32(len(s.d)) - 1; hi > top {
		s.d = append(s.d, make([]int64, hi-top)...)
	}
}

// normalize propagates carries so that every digit but the top one is in
// [0, 2^32); the top digit carries the sign.
func (s *ExactSum) normalize() {
	s.adds = 0
	for i := 0; i+1 < len(s.d); i++ {
		c := s.d[i] >> 32
		s.d[i] -= c << 32
		s.d[i+1] += c
	}
	if n := len(s.d); n > 0 && (s.d[n-1] > 1<<40 || s.d[n-1] < -1<<40) {
		c := s.d[n-1] >> 32
		s.d[n-1] -= c << 32
		s.d = append(s.d, c)
	}
}

// Merge adds o into s. o keeps its value (its digits are normalised in
// place).
func (s *ExactSum) Merge(o *ExactSum) {
	s.posInf = s.posInf || o.posInf
	s.negInf = s.negInf || o.negInf
	if len(o.d) == 0 {
		return
	}
	s.normalize()
	o.normalize()
	s.cover(o.base, o.base+int32(len(o.d))-1)
	off := o.base - s.base
	for i, v := range o.d {
		s.d[int32(i)+off] += v
	}
	s.normalize()
}

// exact returns the exact sum as a big.Float (precision large enough to
// hold it exactly), or, for sums with infinities, nil and ±Inf (NaN for
// +Inf + -Inf). The result is newly allocated.
func (s *ExactSum) exact() (*big.Float, float64) {
	switch {
	case s.posInf && s.negInf:
		return nil, math.NaN()
	case s.posInf:
		return nil, math.Inf(1)
	case s.negInf:
		return nil, math.Inf(-1)
	}
	c := *s
	c.d = append([]int64(nil), s.d...)
	c.normalize()
	x := new(big.Int)
	var w big.Int
	for i := len(c.d) - 1; i >= 0; i-- {
		x.Lsh(x, 32)
		x.Add(x, w.SetInt64(c.d[i]))
	}
	f := new(big.Float).SetInt(x)
	if f.Sign() != 0 {
		f.SetMantExp(f, int(c.base)*32-exactUnit)
	}
	return f, 0
}

// Float64 returns the sum rounded to the nearest float64 (ties to even).
func (s *ExactSum) Float64() float64 {
	f, special := s.exact()
	if f == nil {
		return special
	}
	v, _ := f.Float64()
	return v + 0 // -0 never arises from an exact sum; keep +0 canonical
}

// Mean returns the sum divided by n, correctly rounded to 53 bits, or 0
// when n is 0.
func (s *ExactSum) Mean(n int64) float64 {
	if n == 0 {
		return 0
	}
	f, special := s.exact()
	if f == nil {
		return special
	}
	q := new(big.Float).SetPrec(53).Quo(f, new(big.Float).SetInt64(n))
	v, _ := q.Float64()
	return v + 0
}

// bytes returns the memory held by s.
func (s *ExactSum) bytes() int64 { return int64(cap(s.d)) * 8 }
