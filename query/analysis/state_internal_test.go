package analysis

import (
	"errors"
	"math"
	"runtime"
	"testing"
)

// Crafted states from a review of the decoders (untrusted input): each
// must be refused with an error wrapping ErrState, never accepted into a
// state Add cannot make.

// refused fails t unless err wraps ErrState.
func refused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrState) {
		t.Errorf("%s: got %v, want an error wrapping ErrState", what, err)
	}
}

// craftFunnel encodes a 2-step steps-view funnel state of f's spec with
// one group per key, each written by group.
func craftFunnel(f *Funnel, keys []Key, group func(e *encoder)) []byte {
	e := encoder{}
	e.header(kindFunnel, f.SpecFingerprint())
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.key(k)
		group(&e)
	}
	return e.b
}

func TestDecodeFunnelRefuses(t *testing.T) {
	spec := FunnelSpec{Steps: 2, Window: 1000, From: 0, To: 1 << 40}
	none, err := NewFunnel(spec, FunnelOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// reached, then durs[0..2], then the list
	valid := func(reached [3]uint64, durs [3][]int64) func(e *encoder) {
		return func(e *encoder) {
			for _, r := range reached {
				e.uvarint(r)
			}
			for _, d := range durs {
				e.int64s(d)
			}
			e.list(&UserList{n: int64(reached[0] + reached[1] + reached[2])})
		}
	}
	ok := valid([3]uint64{0, 5, 3}, [3][]int64{nil, nil, {1, 2, 1000}})
	if _, err := DecodeFunnel(spec, FunnelOptions{}, craftFunnel(none, []Key{{}}, ok)); err != nil {
		t.Fatalf("a valid state refused: %v", err)
	}
	for _, c := range []struct {
		name string
		keys []Key
		grp  func(e *encoder)
	}{
		{"key without a breakdown", []Key{{Bits: 7, Set: true}}, ok},
		{"negative duration", []Key{{}}, valid([3]uint64{0, 5, 3}, [3][]int64{nil, nil, {1, -2, 3}})},
		{"duration beyond the window", []Key{{}}, valid([3]uint64{0, 5, 3}, [3][]int64{nil, nil, {1, 2, 1001}})},
		{"durations at step 1", []Key{{}}, valid([3]uint64{0, 5, 3}, [3][]int64{nil, {-5, -6, -7}, {1, 2, 3}})},
		{"durations at step 0", []Key{{}}, valid([3]uint64{0, 5, 3}, [3][]int64{{1}, nil, {1, 2, 3}})},
		{"fewer durations than users", []Key{{}}, valid([3]uint64{0, 5, 3}, [3][]int64{nil, nil, {1}})},
		{"more durations than users", []Key{{}}, valid([3]uint64{0, 5, 3}, [3][]int64{nil, nil, {1, 2, 3, 4}})},
		{"count beyond 2^53", []Key{{}}, valid([3]uint64{0, 1 << 53, 0}, [3][]int64{})},
	} {
		_, err := DecodeFunnel(spec, FunnelOptions{}, craftFunnel(none, c.keys, c.grp))
		refused(t, c.name, err)
	}

	// Grouped attribution rows: a key outside the group is refused.
	opt := FunnelOptions{Key: KeySource{From: KeyEvent, Index: 0}, Attribution: AttrAllSteps,
		Group: &KeyGroup{Kept: []Key{{Bits: 1, Set: true}}, Other: Key{Bits: 99}}}
	rows, err := NewFunnel(spec, opt)
	if err != nil {
		t.Fatal(err)
	}
	rowsState := func(k Key) []byte {
		e := encoder{}
		e.header(kindFunnel, rows.SpecFingerprint())
		valid([3]uint64{}, [3][]int64{})(&e) // total
		e.uvarint(1)
		e.key(k)
		ok(&e)
		return e.b
	}
	for _, k := range []Key{{Bits: 1, Set: true}, {Bits: 99}} {
		if _, err := DecodeFunnel(spec, opt, rowsState(k)); err != nil {
			t.Errorf("group key %+v refused: %v", k, err)
		}
	}
	_, err = DecodeFunnel(spec, opt, rowsState(Key{Bits: 2, Set: true}))
	refused(t, "key no group has", err)

	// Time to convert: durations of converted users only, no reached counts.
	ttc := FunnelOptions{View: ViewTimeToConvert}
	tf, err := NewFunnel(spec, ttc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeFunnel(spec, ttc, craftFunnel(tf, []Key{{}}, valid([3]uint64{}, [3][]int64{{3, 4}}))); err != nil {
		t.Errorf("a valid time-to-convert state refused: %v", err)
	}
	_, err = DecodeFunnel(spec, ttc, craftFunnel(tf, []Key{{}}, valid([3]uint64{0, 1, 0}, [3][]int64{{3, 4}})))
	refused(t, "reached counts in the time-to-convert view", err)
	_, err = DecodeFunnel(spec, ttc, craftFunnel(tf, []Key{{}}, valid([3]uint64{}, [3][]int64{{3}, nil, {4}})))
	refused(t, "step durations in the time-to-convert view", err)

	// Trends: no more converted than entered users.
	tr := FunnelOptions{View: ViewTrends, Bounds: []int64{0, 1 << 40}}
	trf, err := NewFunnel(spec, tr)
	if err != nil {
		t.Fatal(err)
	}
	trends := func(entered, converted uint64) []byte {
		return craftFunnel(trf, []Key{{}}, func(e *encoder) {
			for range 3 {
				e.uvarint(0)
			}
			for range 3 {
				e.int64s(nil)
			}
			e.uvarint(entered)
			e.uvarint(converted)
			e.list(&UserList{})
		})
	}
	if _, err := DecodeFunnel(spec, tr, trends(3, 2)); err != nil {
		t.Errorf("a valid trends state refused: %v", err)
	}
	refused(t, "more converted than entered", func() error { _, err := DecodeFunnel(spec, tr, trends(2, 3)); return err }())
}

// A cell must hold one value per item counted when its math keeps them,
// none otherwise, and its min no greater than its max.
func TestDecodeTrendCells(t *testing.T) {
	cases := []struct {
		name  string
		math  TrendMath
		n     uint64
		min   float64
		max   float64
		vals  []float64
		valid bool
	}{
		{"count per user, values as counted", MathCountPerUserAvg, 2, 0, 0, []float64{1, 2}, true},
		{"count per user, fewer values", MathCountPerUserAvg, 3, 0, 0, nil, false},
		{"count per user, more values", MathCountPerUserMedian, 1, 0, 0, []float64{1, 2}, false},
		{"percentile, fewer values", MathP90, 3, 0, 0, []float64{1}, false},
		{"percentile, values as counted", MathP90, 1, 0, 0, []float64{1}, true},
		{"sum with values", MathSum, 1, 0, 0, []float64{1}, false},
		{"min above max", MathMin, 2, 5, 1, nil, false},
		{"min and max", MathMin, 2, 1, 5, nil, true},
	}
	for _, c := range cases {
		spec := TrendSpec{Bounds: []int64{0, 86400e6}, From: 0, To: 86400e6,
			Series: []TrendSeries{{Math: c.math, Bit: 0, Float: true}}}
		tr, err := NewTrend(spec)
		if err != nil {
			t.Fatal(err)
		}
		e := encoder{}
		e.header(kindTrend, tr.SpecFingerprint())
		e.uvarint(1)
		e.key(Key{})
		e.counts(make([]int64, tr.nb*tr.nw))
		e.counts(make([]int64, tr.nw))
		empty := trendCell{}
		for range tr.nw { // tots
			e.cell(&empty)
		}
		for range tr.nb * tr.nw {
			e.uvarint(c.n)
			e.f64(c.min)
			e.f64(c.max)
			e.sum(&ExactSum{})
			e.f64s(c.vals)
		}
		d, err := DecodeTrend(spec, e.b)
		if c.valid {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			} else if res := d.Result(nil); len(res.Series) == 0 {
				t.Errorf("%s: no series", c.name)
			}
			continue
		}
		refused(t, c.name, err)
	}
}

// A trend with a group but no breakdown decodes its own state (its one
// slot is Key{}); other keys stay refused.
func TestDecodeTrendNoneGroup(t *testing.T) {
	spec := TrendSpec{Bounds: []int64{0, 86400e6}, From: 0, To: 86400e6,
		Series: []TrendSeries{{Math: MathCount, Bit: 0}},
		Group:  &KeyGroup{Other: Key{Bits: 42}}}
	tr, err := NewTrend(spec)
	if err != nil {
		t.Fatal(err)
	}
	tr.slots[0].counts[0] = 3
	b, _ := tr.AppendBinary(nil)
	d, err := DecodeTrend(spec, b)
	if err != nil {
		t.Fatalf("own state refused: %v", err)
	}
	if d.slots[0].counts[0] != 3 {
		t.Errorf("count %d after the round trip, want 3", d.slots[0].counts[0])
	}
	e := encoder{}
	e.header(kindTrend, tr.SpecFingerprint())
	e.uvarint(1)
	e.key(Key{Bits: 42})
	e.counts(make([]int64, tr.nb*tr.nw))
	e.counts(make([]int64, tr.nw))
	for range tr.nw + tr.nb*tr.nw {
		e.uvarint(0)
	}
	_, err = DecodeTrend(spec, e.b)
	refused(t, "the group's other key without a breakdown", err)
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	f()
	runtime.ReadMemStats(&m1)
	return m1.TotalAlloc - m0.TotalAlloc
}

// A state of many near-empty groups, whose encoding is far smaller than
// the memory they take once decoded, must not make the decoder allocate
// more than a small multiple of its input.
func TestDecodeAmplification(t *testing.T) {
	spec := FunnelSpec{Steps: 2, Window: 1000, From: 0, To: 1 << 40}
	opt := FunnelOptions{Key: KeySource{From: KeyEvent, Index: 0}}
	f, err := NewFunnel(spec, opt)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = Key{Bits: uint64(i), Set: true}
	}
	b := craftFunnel(f, keys, func(e *encoder) {
		for range 3 {
			e.uvarint(0)
		}
		for range 3 {
			e.int64s(nil)
		}
		e.list(&UserList{})
	})
	var derr error
	got := allocated(func() { _, derr = DecodeFunnel(spec, opt, b) })
	if got > 64*uint64(len(b)) {
		t.Errorf("funnel: %d bytes of input allocated %d bytes (x%d)", len(b), got, got/uint64(len(b)))
	}
	refused(t, "funnel of 100,000 empty groups", derr)

	var bounds []int64
	for d := int64(0); d <= 30; d++ {
		bounds = append(bounds, d*86400e6)
	}
	tspec := TrendSpec{Bounds: bounds, From: 0, To: bounds[len(bounds)-1],
		Series:    []TrendSeries{{Math: MathSum, Bit: 0, Col: 0, Float: true}},
		Breakdown: KeySource{From: KeyEvent, Index: 1}}
	tr, err := NewTrend(tspec)
	if err != nil {
		t.Fatal(err)
	}
	e := encoder{}
	e.header(kindTrend, tr.SpecFingerprint())
	const m = 20_000
	e.uvarint(m)
	for i := range m {
		e.key(Key{Bits: uint64(i), Set: true})
		e.counts(make([]int64, tr.nb*tr.nw))
		e.counts(make([]int64, tr.nw))
		for range tr.nw + tr.nb*tr.nw {
			e.uvarint(0)
		}
	}
	got = allocated(func() { _, derr = DecodeTrend(tspec, e.b) })
	if got > 64*uint64(len(e.b)) {
		t.Errorf("trend: %d bytes of input allocated %d bytes (x%d)", len(e.b), got, got/uint64(len(e.b)))
	}
	if derr != nil {
		t.Logf("trend of %d empty slots refused: %v", m, derr)
	}
}

// Decoded counts are below 2^53, so that merging two cannot overflow.
func TestDecodeCountBound(t *testing.T) {
	list := func(n uint64) []byte {
		e := encoder{}
		e.header(kindUserList, 0)
		e.uvarint(0)
		e.uvarint(n)
		e.uvarint(0)
		return e.b
	}
	_, err := DecodeUserList(0, list(math.MaxInt64))
	refused(t, "count MaxInt64", err)
	_, err = DecodeUserList(0, list(1<<53))
	refused(t, "count 2^53", err)
	a, err := DecodeUserList(0, list(1<<53-1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := DecodeUserList(0, list(1<<53-1))
	if err := a.Merge(b); err != nil {
		t.Fatal(err)
	}
	if a.Count() != 1<<54-2 {
		t.Errorf("merged count %d, want 2^54-2", a.Count())
	}
}

// A user list counts a user once: duplicate kept ids are refused.
func TestDecodeUserListDuplicate(t *testing.T) {
	e := encoder{}
	e.header(kindUserList, 3)
	e.list(&UserList{Keep: 3, n: 2, ids: maxHeap{"a", "a"}})
	_, err := DecodeUserList(3, e.b)
	refused(t, "duplicate ids", err)
	e = encoder{}
	e.header(kindUserList, 3)
	e.list(&UserList{Keep: 3, n: 2, ids: maxHeap{"b", "a"}})
	if _, err := DecodeUserList(3, e.b); err != nil {
		t.Errorf("distinct ids refused: %v", err)
	}
}

// Merging equal sums level by level (a tree of 2^30 shards) keeps the
// digit window to what the value needs: the states still decode.
func TestExactSumMergeWindow(t *testing.T) {
	var s ExactSum
	s.AddFloat(5e-324)
	s.AddFloat(1e300)
	for lvl := 1; lvl <= 30; lvl++ {
		c := s
		c.d = append([]int64(nil), s.d...)
		s.Merge(&c)
		e := encoder{}
		e.sum(&s)
		d := newDecoder(e.b, nil, "sum")
		var r ExactSum
		d.sum(&r)
		if err := d.end(); err != nil {
			t.Fatalf("level %d: base %d, %d digits: %v", lvl, s.base, len(s.d), err)
		}
		if r.Float64() != s.Float64() {
			t.Fatalf("level %d: decoded %g, want %g", lvl, r.Float64(), s.Float64())
		}
	}
	if want := math.Ldexp(1e300, 30); s.Float64() != want {
		t.Errorf("sum %g, want %g", s.Float64(), want)
	}
}
