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

// mismatch checks that an accumulator of another spec (made by other)
// does not merge into one made by mk and that its state does not decode
// with decode (of mk's spec).
func mismatch[A stateKernel[A]](t *testing.T, name string, mk, other func() (A, error), decode func([]byte) (A, error)) {
	t.Helper()
	a, err := mk()
	if err != nil {
		t.Fatal(err)
	}
	o, err := other()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Merge(o); !errors.Is(err, analysis.ErrState) {
		t.Errorf("%s: Merge of another spec: %v", name, err)
	}
	enc, err := o.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(enc); !errors.Is(err, analysis.ErrState) {
		t.Errorf("%s: decode of another spec's state: %v", name, err)
	}
	enc[0]++ // another version
	if _, err := decode(enc); !errors.Is(err, analysis.ErrState) {
		t.Errorf("%s: decode of another version: %v", name, err)
	}
}

// TestStateMismatch: a state of another spec is refused by Merge and by
// the decoders, with an error wrapping ErrState.
func TestStateMismatch(t *testing.T) {
	b := []int64{0, day, 2 * day}
	s1 := analysis.TrendSpec{Bounds: b, From: 0, To: 2 * day, Series: []analysis.TrendSeries{{}}}
	s2 := s1
	s2.Series = []analysis.TrendSeries{{Math: analysis.MathUsers}}
	s3 := s1
	s3.Bounds = []int64{0, day / 2, 2 * day}
	s4 := s1
	s4.Group = &analysis.KeyGroup{Other: otherKey}
	for i, o := range []analysis.TrendSpec{s2, s3, s4} {
		mismatch(t, fmt.Sprint("trend ", i), func() (*analysis.Trend, error) { return analysis.NewTrend(s1) },
			func() (*analysis.Trend, error) { return analysis.NewTrend(o) },
			func(b []byte) (*analysis.Trend, error) { return analysis.DecodeTrend(s1, b) })
	}
	fs := analysis.FunnelSpec{Steps: 2, To: day}
	for i, o := range []analysis.FunnelOptions{{View: analysis.ViewTimeToConvert}, {List: &analysis.FunnelList{Step: 1, Keep: 2}},
		{Key: analysis.KeySource{From: analysis.KeyUser}}} {
		mismatch(t, fmt.Sprint("funnel ", i), func() (*analysis.Funnel, error) { return analysis.NewFunnel(fs, analysis.FunnelOptions{}) },
			func() (*analysis.Funnel, error) { return analysis.NewFunnel(fs, o) },
			func(b []byte) (*analysis.Funnel, error) {
				return analysis.DecodeFunnel(fs, analysis.FunnelOptions{}, b)
			})
	}
	rs := analysis.RetentionSpec{Bounds: b, Periods: 1, To: day}
	for i, o := range []analysis.RetentionSpec{{Bounds: b, Periods: 2, To: day}, {Bounds: b, Periods: 1, To: day, Type: analysis.TypeRecurring}} {
		mismatch(t, fmt.Sprint("retention ", i), func() (*analysis.Retention, error) { return analysis.NewRetention(rs) },
			func() (*analysis.Retention, error) { return analysis.NewRetention(o) },
			func(b []byte) (*analysis.Retention, error) { return analysis.DecodeRetention(rs, b) })
	}
	ss := analysis.StickinessSpec{Bounds: b, To: day, Series: []int{0}, MinEvents: 1}
	for i, o := range []analysis.StickinessSpec{{Bounds: b, To: day, Series: []int{1}, MinEvents: 1}, {Bounds: b, To: day, Series: []int{0}, MinEvents: 2}} {
		mismatch(t, fmt.Sprint("stickiness ", i), func() (*analysis.Stickiness, error) { return analysis.NewStickiness(ss) },
			func() (*analysis.Stickiness, error) { return analysis.NewStickiness(o) },
			func(b []byte) (*analysis.Stickiness, error) { return analysis.DecodeStickiness(ss, b) })
	}
	lb := []int64{-day, 0, day, 2 * day}
	ls := analysis.LifecycleSpec{Bounds: lb, To: day, Seen: 1}
	for i, o := range []analysis.LifecycleSpec{{Bounds: lb, To: day}, {Bounds: lb, To: day, Seen: 1, List: &analysis.LifecycleList{Keep: 1}}} {
		mismatch(t, fmt.Sprint("lifecycle ", i), func() (*analysis.Lifecycle, error) { return analysis.NewLifecycle(ls) },
			func() (*analysis.Lifecycle, error) { return analysis.NewLifecycle(o) },
			func(b []byte) (*analysis.Lifecycle, error) { return analysis.DecodeLifecycle(ls, b) })
	}
	ps := analysis.PathsSpec{To: day, Include: 1, SessionGap: 1, Steps: 3}
	for i, o := range []analysis.PathsSpec{{To: day, Include: 1, SessionGap: 1, Steps: 4}, {To: day, Include: 3, SessionGap: 1, Steps: 3}} {
		mismatch(t, fmt.Sprint("paths ", i), func() (*analysis.Paths, error) { return analysis.NewPaths(ps) },
			func() (*analysis.Paths, error) { return analysis.NewPaths(o) },
			func(b []byte) (*analysis.Paths, error) { return analysis.DecodePaths(ps, b) })
	}
	as := analysis.AttributionSpec{To: day, Touchpoints: []analysis.Touchpoint{{Bit: 1}}, Subsequent: -1, Value: analysis.ValueCol{Col: -1},
		SubsequentValue: analysis.ValueCol{Col: -1}}
	as2, as3 := as, as
	as2.Model = analysis.AttributionModel(1)
	as3.Touchpoints = []analysis.Touchpoint{{Bit: 1, Lookback: 1}}
	for i, o := range []analysis.AttributionSpec{as2, as3} {
		mismatch(t, fmt.Sprint("attribution ", i), func() (*analysis.Attribution, error) { return analysis.NewAttribution(as) },
			func() (*analysis.Attribution, error) { return analysis.NewAttribution(o) },
			func(b []byte) (*analysis.Attribution, error) { return analysis.DecodeAttribution(as, b) })
	}
	c1 := analysis.CohortCond{Op: analysis.CohortPerformed, To: day, N: 1}
	c2 := c1
	c2.N = 2
	enc, _ := analysis.NewCohortState(&c2).AppendBinary(nil)
	if _, err := analysis.DecodeCohortState(&c1, enc); !errors.Is(err, analysis.ErrState) {
		t.Errorf("cohort: decode of another condition's state: %v", err)
	}
	l := analysis.UserList{Keep: 2}
	if err := l.Merge(&analysis.UserList{Keep: 3}); !errors.Is(err, analysis.ErrState) {
		t.Errorf("user list: Merge of another Keep: %v", err)
	}
	enc, _ = (&analysis.UserList{Keep: 3}).AppendBinary(nil)
	if _, err := analysis.DecodeUserList(2, enc); !errors.Is(err, analysis.ErrState) {
		t.Errorf("user list: decode of another Keep: %v", err)
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
		q := randomRetentionQuery(t, d)
		q.Type, q.Windows = analysis.RetentionType(d.r.IntN(2)), analysis.RetentionWindows(d.r.IntN(2))
		q.Criterion = analysis.RetentionCriterion(d.r.IntN(2))
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

// randomGroup returns nil or a KeyGroup keeping a random part of the
// keys of src in trails, the others under otherKey.
func randomGroup(d *diffCase, trails []testutil.UserTrail, src analysis.KeySource) *analysis.KeyGroup {
	if src.From == analysis.KeyNone || d.r.IntN(2) == 0 {
		return nil
	}
	return &analysis.KeyGroup{Other: otherKey, DropKept: d.r.IntN(2) == 0,
		Kept: keysWhere(trails, src, func(analysis.Key) bool { return d.r.IntN(2) == 0 })}
}

// randomListKey returns a random key of src in trails (the zero Key
// without a breakdown).
func randomListKey(d *diffCase, trails []testutil.UserTrail, src analysis.KeySource) analysis.Key {
	keys := keysWhere(trails, src, func(analysis.Key) bool { return true })
	if src.From == analysis.KeyNone || len(keys) == 0 {
		return analysis.Key{}
	}
	return keys[d.r.IntN(len(keys))]
}

func TestStateStickiness(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		b := d.breakdown()
		var events []string
		for range 1 + d.r.IntN(3) {
			events = append(events, diffMatchers[d.r.IntN(len(diffMatchers))])
		}
		tspec, src := trailSpec(b, events)
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		spec := analysis.StickinessSpec{Bounds: timebucket.Bounds(from, to, timebucket.Interval(1+d.r.IntN(4)), d.loc(t), timebucket.WeekStart(d.r.IntN(2))),
			From: from, To: to, MinEvents: 1 + d.r.IntN(3), Breakdown: withDict(src, b, dicts), Group: randomGroup(d, trails, src)}
		for i := range events {
			spec.Series = append(spec.Series, i)
		}
		if d.r.IntN(2) == 0 {
			spec.List = &analysis.StickinessList{Series: d.r.IntN(len(events)), Intervals: 1 + d.r.IntN(len(spec.Bounds)-1),
				AtLeast: d.r.IntN(2) == 0, Keep: d.r.IntN(6), Key: randomListKey(d, trails, src)}
		}
		mk := func() (*analysis.Stickiness, error) { return analysis.NewStickiness(spec) }
		want := accumulate(t, trails, nil, feeder{}, mk).Result()
		got := viaStates(t, seed, trails, d.r, mk, func(b []byte) (*analysis.Stickiness, error) { return analysis.DecodeStickiness(spec, b) }).Result()
		if !reflect.DeepEqual(listed(&got.List), listed(&want.List)) || !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: stickiness via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}

func TestStateLifecycle(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		from, to := d.rangeIn()
		q := testutil.LifecycleQuery{Event: diffMatchers[d.r.IntN(len(diffMatchers))], Interval: timebucket.Interval(1 + d.r.IntN(4)),
			WeekStart: timebucket.WeekStart(d.r.IntN(2)), From: from, To: to}
		q.Loc = d.loc(t)
		if b := d.breakdown(); b != nil && b.User {
			q.Breakdown = b
		}
		tspec, src := trailSpec(q.Breakdown, []string{q.Event, testutil.Any})
		trails, dicts := testutil.BuildTrailsWith(d.data, tspec)
		spec := lifecycleSpec(q)
		spec.Breakdown = withDict(src, q.Breakdown, dicts)
		spec.Group = randomGroup(d, trails, src)
		if d.r.IntN(2) == 0 {
			spec.List = &analysis.LifecycleList{Bucket: d.r.IntN(len(spec.Bounds) - 2), Status: analysis.LifecycleStatus(d.r.IntN(4)),
				Keep: d.r.IntN(6), Key: randomListKey(d, trails, src)}
		}
		mk := func() (*analysis.Lifecycle, error) { return analysis.NewLifecycle(spec) }
		want := accumulate(t, trails, nil, feeder{}, mk).Result()
		got := viaStates(t, seed, trails, d.r, mk, func(b []byte) (*analysis.Lifecycle, error) { return analysis.DecodeLifecycle(spec, b) }).Result()
		if !reflect.DeepEqual(listed(&got.List), listed(&want.List)) || !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: lifecycle via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}

func TestStateUserList(t *testing.T) {
	for seed := range stateSeeds() {
		r := rand.New(rand.NewPCG(uint64(seed), 3))
		keep := r.IntN(8)
		k := 2 + r.IntN(4)
		whole := analysis.UserList{Keep: keep}
		parts := make([]analysis.UserList, k)
		for i := range parts {
			parts[i].Keep = keep
		}
		for u := range r.IntN(40) {
			id := []byte(fmt.Sprintf("u%d-%d", r.IntN(1000), u))
			whole.Add(id)
			parts[r.IntN(k)].Add(id)
		}
		var merged *analysis.UserList
		for _, i := range r.Perm(k) {
			enc, err := parts[i].AppendBinary(nil)
			if err != nil {
				t.Fatal(err)
			}
			l, err := analysis.DecodeUserList(keep, enc)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if merged == nil {
				merged = l
			} else if err := merged.Merge(l); err != nil {
				t.Fatal(err)
			}
		}
		w := &whole
		if got, want := listed(&merged), listed(&w); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: list via states %v, in process %v", seed, got, want)
		}
	}
}

func TestStatePaths(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		q := randomPathsQuery(d)
		c := newPathsCase(d.data, q, d.r.IntN(2) == 0)
		spec := c.spec
		spec.Items = newTestDict(c.items)
		if d.r.IntN(2) == 0 {
			spec.List = &analysis.PathsList{Pos: 1 + d.r.IntN(q.Steps-1), Source: uint32(d.r.IntN(len(c.items))),
				Target: uint32(d.r.IntN(len(c.items))), Keep: d.r.IntN(6)}
		}
		mk := func() (*analysis.Paths, error) { return analysis.NewPaths(spec) }
		want := accumulate(t, c.trails, nil, feeder{}, mk).Result()
		got := viaStates(t, seed, c.trails, d.r, mk, func(b []byte) (*analysis.Paths, error) { return analysis.DecodePaths(spec, b) }).Result()
		if !reflect.DeepEqual(listed(&got.List), listed(&want.List)) || !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: paths via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}

func TestStateAttribution(t *testing.T) {
	for seed := range stateSeeds() {
		d := newDiffCase(seed)
		q := randomAttrQuery(t, d)
		c := newAttrCase(d.data, q)
		spec := c.spec
		spec.Breakdown = withDict(spec.Breakdown, q.Breakdown, c.dicts)
		spec.ChannelDict = withDict(analysis.KeySource{}, &testutil.Breakdown{Prop: q.Channel}, c.dicts).Dict
		spec.Group = randomGroup(d, c.trails, c.spec.Breakdown)
		if d.r.IntN(2) == 0 {
			ch := analysis.Unattributed
			if d.r.IntN(3) > 0 {
				ch = randomListKey(d, c.trails, analysis.KeySource{From: analysis.KeyEvent, Index: 0})
			}
			spec.List = &analysis.AttributionList{Channel: ch, Key: randomListKey(d, c.trails, c.spec.Breakdown), Keep: d.r.IntN(6)}
		}
		mk := func() (*analysis.Attribution, error) { return analysis.NewAttribution(spec) }
		want := accumulate(t, c.trails, nil, feeder{}, mk).Result()
		got := viaStates(t, seed, c.trails, d.r, mk, func(b []byte) (*analysis.Attribution, error) { return analysis.DecodeAttribution(spec, b) }).Result()
		if !reflect.DeepEqual(listed(&got.List), listed(&want.List)) || !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: attribution via states\n%+v\nin process\n%+v", seed, got, want)
		}
	}
}

// TestStatePortableKeys: a state encoded under one query's dictionary
// decodes into another's, whose ids differ: the keys travel as strings
// and the receiving result has the same rows under the receiver's ids.
func TestStatePortableKeys(t *testing.T) {
	strs := []string{"de", "fr", "it", "us"}
	recv := []string{"us", "it", "zz", "fr", "de"} // the receiver's dictionary: other ids
	spec := analysis.TrendSpec{Bounds: []int64{0, day, 2 * day}, From: 0, To: 2 * day,
		Series: []analysis.TrendSeries{{Math: analysis.MathUsers}}, Breakdown: analysis.KeySource{From: analysis.KeyUser, Dict: newTestDict(strs)}}
	send, err := analysis.NewTrend(spec)
	if err != nil {
		t.Fatal(err)
	}
	for u := range 12 {
		send.Add(&trail.Trail{Times: []int64{int64(u) * day / 8}, Mask: []uint64{1}, User: []trail.Value{{Bits: uint64(u % 4), Set: u%5 != 0}}})
	}
	enc, err := send.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	rspec := spec
	rspec.Breakdown.Dict = newTestDict(recv)
	got, err := analysis.DecodeTrend(rspec, enc)
	if err != nil {
		t.Fatal(err)
	}
	label := func(k analysis.Key, dict []string) string {
		if !k.Set {
			return "(none)"
		}
		return dict[k.Bits]
	}
	rows := func(r analysis.TrendResult, dict []string) map[string][]float64 {
		m := map[string][]float64{}
		for _, row := range r.Series[0].Rows {
			m[label(row.Key, dict)] = row.Buckets
		}
		return m
	}
	if w, g := rows(send.Result(nil), strs), rows(got.Result(nil), recv); !reflect.DeepEqual(g, w) || len(w) != 5 {
		t.Errorf("rows by label: sent %v, received %v", w, g)
	}
	// A receiver whose dictionary lacks a value refuses the state.
	rspec.Breakdown.Dict = newTestDict(recv[:2])
	if _, err := analysis.DecodeTrend(rspec, enc); !errors.Is(err, analysis.ErrState) {
		t.Errorf("decode with a dictionary lacking values: %v", err)
	}
}
