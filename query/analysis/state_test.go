package analysis_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/trail"
)

// Portable partial states: for every kind, the answer of one
// accumulator must equal the answer of users split at random over k ≥ 2
// accumulators whose states are encoded (AppendBinary), decoded and
// merged in random order.

// stateSeeds is the number of seeds of each kind's state test (fewer
// under -short, as under -race).
func stateSeeds() int64 {
	if testing.Short() {
		return 300
	}
	return 2000
}

// stateKernel is the accumulator shape of a kind with a portable state.
type stateKernel[A any] interface {
	Add(*trail.Trail)
	Merge(A) error
	AppendBinary([]byte) ([]byte, error)
}

// viaStates adds trails to 2 to 5 accumulators made by mk (users
// assigned at random, trails in random chunks), encodes each, decodes
// them with decode, merges them in random order and returns the merged
// one.
func viaStates[A stateKernel[A]](t *testing.T, seed int64, trails []testutil.UserTrail, r *rand.Rand, mk func() (A, error), decode func([]byte) (A, error)) A {
	t.Helper()
	k := 2 + r.IntN(4)
	accs := make([]A, k)
	for i := range accs {
		a, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		accs[i] = a
	}
	fd := feeder{r: r, maxLen: []int{0, 1, 3, 40}[r.IntN(4)]}
	for i := range trails {
		fd.add(&trails[i].Trail, accs[r.IntN(k)].Add)
	}
	decoded := make([]A, k)
	for i, a := range accs {
		b, err := a.AppendBinary(nil)
		if err != nil {
			t.Fatalf("seed %d: AppendBinary: %v", seed, err)
		}
		if decoded[i], err = decode(b); err != nil {
			t.Fatalf("seed %d: decode: %v", seed, err)
		}
		// A truncated state is an error, not a panic.
		if _, err := decode(b[:r.IntN(len(b))]); err == nil {
			t.Fatalf("seed %d: decode of a truncated state succeeded", seed)
		}
	}
	order := r.Perm(k)
	for _, i := range order[1:] {
		if err := decoded[order[0]].Merge(decoded[i]); err != nil {
			t.Fatalf("seed %d: Merge: %v", seed, err)
		}
	}
	return decoded[order[0]]
}

// testDict is a KeyDict over one string property's dictionary.
type testDict struct {
	strs []string
	ids  map[string]uint64
}

func newTestDict(strs []string) *testDict {
	d := &testDict{strs: strs, ids: map[string]uint64{}}
	for i, s := range strs {
		d.ids[s] = uint64(i)
	}
	return d
}

func (d *testDict) KeyString(k analysis.Key) (string, bool) {
	if !k.Set || k.Bits >= uint64(len(d.strs)) {
		return "", false
	}
	return d.strs[k.Bits], true
}

func (d *testDict) StringKey(s string) (analysis.Key, error) {
	id, ok := d.ids[s]
	if !ok {
		return analysis.Key{}, fmt.Errorf("no value %q", s)
	}
	return analysis.Key{Bits: id, Set: true}, nil
}

// withDict sets src's Dict when b is a breakdown on a string property.
func withDict(src analysis.KeySource, b *testutil.Breakdown, dicts testutil.Dicts) analysis.KeySource {
	if b == nil {
		return src
	}
	typ, name := testutil.EventProps[b.Prop], b.Prop
	if b.User {
		typ, name = testutil.UserProps[b.Prop], "user:"+b.Prop
	}
	if typ == event.TypeString {
		src.Dict = newTestDict(dicts[name])
	}
	return src
}

func TestStateTrend(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		iv := timebucket.Interval(1 + d.r.IntN(4))
		bounds := timebucket.Bounds(from, to, iv, d.loc(t), timebucket.WeekStart(d.r.IntN(2)))
		b := d.breakdown()
		var cols, matchers []string
		spec := analysis.TrendSpec{Bounds: bounds, From: from, To: to}
		for i := range 1 + d.r.IntN(4) {
			m := analysis.TrendMath(d.r.IntN(int(analysis.MathMAU) + 1))
			matchers = append(matchers, diffMatchers[d.r.IntN(len(diffMatchers))])
			ts := analysis.TrendSeries{Math: m, Bit: i}
			if m.NeedsProperty() {
				prop := []string{"n", "f"}[d.r.IntN(2)]
				ts.Col, ts.Float = len(cols), prop == "f"
				cols = append(cols, prop)
			}
			spec.Series = append(spec.Series, ts)
		}
		tspec, src := trailSpec(b, matchers, cols...)
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		spec.Breakdown = withDict(src, b, dicts)
		if b != nil && d.r.IntN(2) == 0 {
			spec.Group = &analysis.KeyGroup{Other: otherKey, DropKept: d.r.IntN(2) == 0,
				Kept: keysWhere(trails, src, func(analysis.Key) bool { return d.r.IntN(2) == 0 })}
		}
		mk := func() (*analysis.Trend, error) { return analysis.NewTrend(spec) }
		want := accumulate(t, trails, nil, feeder{}, mk).Result(nil)
		got := viaStates(t, seed, trails, d.r, mk, func(b []byte) (*analysis.Trend, error) { return analysis.DecodeTrend(spec, b) }).Result(nil)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: trend via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}

// TestStateMismatch: a state of another spec is refused by Merge and by
// the decoders, with an error wrapping the state error.
func TestStateMismatch(t *testing.T) {
	b := []int64{0, day, 2 * day}
	s1 := analysis.TrendSpec{Bounds: b, From: 0, To: 2 * day, Series: []analysis.TrendSeries{{}}}
	s2 := s1
	s2.Series = []analysis.TrendSeries{{Math: analysis.MathUsers}}
	s3 := s1
	s3.Bounds = []int64{0, day / 2, 2 * day}
	for i, o := range []analysis.TrendSpec{s2, s3} {
		t1, _ := analysis.NewTrend(s1)
		t2, _ := analysis.NewTrend(o)
		if err := t1.Merge(t2); err == nil {
			t.Errorf("trend %d: Merge of another spec: no error", i)
		}
		enc, err := t2.AppendBinary(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := analysis.DecodeTrend(s1, enc); err == nil || !errors.Is(err, analysis.ErrState) {
			t.Errorf("trend %d: decode of another spec's state: %v", i, err)
		}
	}
	fs := analysis.FunnelSpec{Steps: 2, To: day}
	for i, o := range []analysis.FunnelOptions{{View: analysis.ViewTimeToConvert}, {List: &analysis.FunnelList{Step: 1, Keep: 2}},
		{Key: analysis.KeySource{From: analysis.KeyUser}}} {
		f1, _ := analysis.NewFunnel(fs, analysis.FunnelOptions{})
		f2, err := analysis.NewFunnel(fs, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := f1.Merge(f2); err == nil {
			t.Errorf("funnel %d: Merge of another spec: no error", i)
		}
		enc, _ := f2.AppendBinary(nil)
		if _, err := analysis.DecodeFunnel(fs, analysis.FunnelOptions{}, enc); !errors.Is(err, analysis.ErrState) {
			t.Errorf("funnel %d: decode of another spec's state: %v", i, err)
		}
	}
	rs := analysis.RetentionSpec{Bounds: b, Periods: 1, To: day}
	for i, o := range []analysis.RetentionSpec{{Bounds: b, Periods: 2, To: day}, {Bounds: b, Periods: 1, To: day, Type: analysis.TypeRecurring}} {
		r1, _ := analysis.NewRetention(rs)
		r2, err := analysis.NewRetention(o)
		if err != nil {
			t.Fatal(err)
		}
		if err := r1.Merge(r2); err == nil {
			t.Errorf("retention %d: Merge of another spec: no error", i)
		}
		enc, _ := r2.AppendBinary(nil)
		if _, err := analysis.DecodeRetention(rs, enc); !errors.Is(err, analysis.ErrState) {
			t.Errorf("retention %d: decode of another spec's state: %v", i, err)
		}
	}
}

func TestStateFunnel(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		c := newModeCase(t, d, modeOrders[d.r.IntN(3)], modeViews[d.r.IntN(3)])
		opt := c.opt
		opt.Key = withDict(opt.Key, c.q.Breakdown, c.dicts)
		if d.r.IntN(2) == 0 {
			l := &analysis.FunnelList{Keep: d.r.IntN(6), Step: 1 + d.r.IntN(c.spec.Steps), Dropped: d.r.IntN(2) == 0, Converted: d.r.IntN(2) == 0}
			switch opt.View {
			case analysis.ViewSteps:
			case analysis.ViewTrends:
				l.Step, l.Bucket = 0, d.r.IntN(len(opt.Bounds)-1)
			default:
				l.Step, l.Bins, l.BinWidth = 0, 1+d.r.IntN(5), 1+d.r.Int64N(3600)
				l.Bin = d.r.IntN(l.Bins)
			}
			opt.List = l
		}
		if opt.Attribution == analysis.AttrAllSteps || opt.Attribution == analysis.AttrStep {
			if d.r.IntN(2) == 0 {
				opt.Group = &analysis.KeyGroup{Other: otherKey,
					Kept: keysWhere(c.trails, opt.Key, func(analysis.Key) bool { return d.r.IntN(2) == 0 })}
			}
		}
		mk := func() (*analysis.Funnel, error) { return analysis.NewFunnel(c.spec, opt) }
		want := accumulate(t, c.trails, nil, feeder{}, mk).Result(nil)
		got := viaStates(t, seed, c.trails, d.r, mk, func(b []byte) (*analysis.Funnel, error) { return analysis.DecodeFunnel(c.spec, opt, b) }).Result(nil)
		if !reflect.DeepEqual(listed(&got.List), listed(&want.List)) {
			t.Fatalf("seed %d: funnel list via states %v, in process %v", seed, listed(&got.List), listed(&want.List))
		}
		for i := range want.Groups {
			if i < len(got.Groups) && !reflect.DeepEqual(listed(&got.Groups[i].List), listed(&want.Groups[i].List)) {
				t.Fatalf("seed %d: funnel list %d via states %v, in process %v", seed, i, listed(&got.Groups[i].List), listed(&want.Groups[i].List))
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: funnel via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}

// listed returns the count and ids of *l (the heap order of a list's ids
// depends on the order of merges) and sets *l to nil.
func listed(l **analysis.UserList) []string {
	if *l == nil {
		return nil
	}
	out := append([]string{fmt.Sprint((*l).Count())}, (*l).Page(0, (*l).Keep)...)
	*l = nil
	return out
}

func TestStateRetention(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		q := testutil.RetentionQuery{
			Start:     diffMatchers[d.r.IntN(len(diffMatchers))],
			Return:    diffMatchers[d.r.IntN(len(diffMatchers))],
			Interval:  timebucket.Interval(1 + d.r.IntN(3)),
			WeekStart: timebucket.WeekStart(d.r.IntN(2)),
			Periods:   1 + d.r.IntN(8),
			From:      from, To: to,
			Common: testutil.Common{Loc: d.loc(t)},
			Type:   analysis.RetentionType(d.r.IntN(2)), Windows: analysis.RetentionWindows(d.r.IntN(2)),
			Criterion: analysis.RetentionCriterion(d.r.IntN(2)),
		}
		q.Breakdown = d.breakdown()
		spec := retentionSpec(q, q.Periods)
		if d.r.IntN(2) == 0 {
			nc := len(timebucket.Bounds(q.From, q.To, q.Interval, q.Loc, q.WeekStart)) - 1
			spec.List = &analysis.RetentionList{Cohort: d.r.IntN(nc), Period: d.r.IntN(q.Periods), Keep: d.r.IntN(6)}
		}
		tspec, src := trailSpec(q.Breakdown, []string{q.Start, q.Return})
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		spec.Breakdown = withDict(src, q.Breakdown, dicts)
		mk := func() (*analysis.Retention, error) { return analysis.NewRetention(spec) }
		want := accumulate(t, trails, nil, feeder{}, mk).Result(nil)
		got := viaStates(t, seed, trails, d.r, mk, func(b []byte) (*analysis.Retention, error) { return analysis.DecodeRetention(spec, b) }).Result(nil)
		for i := range want.Groups {
			if i < len(got.Groups) && !reflect.DeepEqual(listed(&got.Groups[i].List), listed(&want.Groups[i].List)) {
				t.Fatalf("seed %d: retention list %d differs", seed, i)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: retention via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}
