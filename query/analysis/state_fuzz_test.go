package analysis_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// fuzzKind is one kind's decoder under FuzzDecodeState: decode decodes a
// state of the kind's fixed spec and returns its result and its
// re-encoding; states returns valid states for the seed corpus.
type fuzzKind struct {
	name   string
	decode func(b []byte) (res any, enc []byte, err error)
	states func() [][]byte
}

// fuzzData returns the trails of a small seeded data set with a string
// event column "s" (column 0), a numeric "n" (1), a float "f" (2) and
// the user property "tier", and the dictionary of "s".
func fuzzData(matchers []string) ([]testutil.UserTrail, *testDict) {
	d := newDiffCase(7)
	ts := testutil.TrailSpec{Cols: []string{"s", "n", "f"}, UserCols: []string{"tier"}}
	for _, m := range matchers {
		ts.Matchers = append(ts.Matchers, testutil.Matcher{Event: m})
	}
	trails, dicts := testutil.BuildTrailsWith(d.data, ts)
	return trails, newTestDict(dicts["s"])
}

// fuzzStates splits trails over three accumulators made by mk and returns
// their encodings and the encoding of one holding them all.
func fuzzStates[A stateKernel[A]](mk func() (A, error), trails []testutil.UserTrail) [][]byte {
	var out [][]byte
	accs := make([]A, 4)
	for i := range accs {
		a, err := mk()
		if err != nil {
			panic(err)
		}
		accs[i] = a
	}
	for i := range trails {
		accs[i%3].Add(&trails[i].Trail)
		accs[3].Add(&trails[i].Trail)
	}
	for _, a := range accs {
		b, err := a.AppendBinary(nil)
		if err != nil {
			panic(err)
		}
		out = append(out, b)
	}
	return out
}

// newFuzzKind returns the fuzzKind of accumulators made by mk and
// decoded by decode, whose result (lists as their pages) result returns.
func newFuzzKind[A stateKernel[A]](name string, trails []testutil.UserTrail, mk func() (A, error), decode func([]byte) (A, error), result func(A) any) fuzzKind {
	return fuzzKind{
		name: name,
		decode: func(b []byte) (any, []byte, error) {
			a, err := decode(b)
			if err != nil {
				return nil, nil, err
			}
			enc, err := a.AppendBinary(nil)
			return result(a), enc, err
		},
		states: func() [][]byte { return fuzzStates(mk, trails) },
	}
}

// The order of fuzzKinds is the corpus's: append new kinds at the end.
func fuzzKinds() []fuzzKind {
	bounds := timebucket.Bounds(1616716800000000, 1617062400000000, timebucket.Day, time.UTC, 0)
	from, to := bounds[0], bounds[len(bounds)-1]
	trails, dict := fuzzData([]string{"a", "b", "c|d", "d"})
	ev := analysis.KeySource{From: analysis.KeyEvent, Index: 0, Dict: dict}
	trend := analysis.TrendSpec{Bounds: bounds, From: from, To: to, Breakdown: ev,
		Series: []analysis.TrendSeries{{Math: analysis.MathUsers}, {Math: analysis.MathP90, Bit: 1, Col: 2, Float: true},
			{Math: analysis.MathSum, Bit: 2, Col: 1}, {Math: analysis.MathCountPerUserMedian, Bit: 3}, {Math: analysis.MathWAU, Bit: 4}}}
	funnel := analysis.FunnelSpec{Steps: 3, Window: 86400e6, From: from, To: to,
		Exclusions: []analysis.FunnelExclusion{{Bit: 3, From: 1, To: 2}}}
	fopt := analysis.FunnelOptions{Key: ev, Attribution: analysis.AttrAllSteps, List: &analysis.FunnelList{Step: 2, Keep: 3}}
	ret := analysis.RetentionSpec{Bounds: timebucket.Extend(bounds, 3, timebucket.Day, time.UTC, 0), Periods: 3, From: from, To: to,
		Breakdown: ev, List: &analysis.RetentionList{Cohort: 1, Keep: 2}}
	stick := analysis.StickinessSpec{Bounds: bounds, From: from, To: to, Series: []int{0, 2}, MinEvents: 2, Breakdown: ev,
		Group: &analysis.KeyGroup{Kept: []analysis.Key{{Bits: 1, Set: true}}, Other: otherKey}, List: &analysis.StickinessList{Intervals: 1, Keep: 2}}
	life := lifecycleSpec(testutil.LifecycleQuery{Interval: timebucket.Day, From: from, To: to})
	life.Breakdown, life.List = analysis.KeySource{From: analysis.KeyUser}, &analysis.LifecycleList{Keep: 3}
	pc := newPathsCase(newDiffCase(7).data, testutil.PathsQuery{SessionGap: 3600e6, Steps: 4, From: from, To: to, ItemProp: "s"}, false)
	paths := pc.spec
	paths.Items, paths.List = newTestDict(pc.items), &analysis.PathsList{Pos: 1, Source: 0, Target: 1, Keep: 2}
	ac := newAttrCase(newDiffCase(7).data, testutil.AttributionQuery{Conversion: testutil.Matcher{Event: "a"}, Channel: "s",
		Touchpoints: []testutil.Matcher{{Event: "b"}, {Event: "c"}}, Lookbacks: []int64{86400e6, 3600e6}, Model: analysis.AttributionModel(2),
		Value: "f", Subsequent: &testutil.Matcher{Event: "d"}, SubWindow: 86400e6, Interval: timebucket.Day, From: from, To: to,
		Common: testutil.Common{Breakdown: &testutil.Breakdown{Prop: "tier", User: true}}})
	attr := ac.spec
	attr.ChannelDict = newTestDict(ac.dicts["s"])
	attr.Group = &analysis.KeyGroup{Kept: []analysis.Key{{Bits: 0, Set: true}}, Other: otherKey}
	attr.List = &analysis.AttributionList{Channel: analysis.Unattributed, Key: otherKey, Keep: 3}
	cohort := analysis.CohortCond{Op: analysis.CohortOr, Kids: []analysis.CohortCond{
		{Op: analysis.CohortPerformed, Bit: 1, From: from, To: to, Count: analysis.CountOp(1), N: 2},
		{Op: analysis.CohortAnd, Kids: []analysis.CohortCond{{Op: analysis.CohortFirstPerformed, Bit: 0, From: from, To: to}, {Op: analysis.CohortUserFlag}}}}}
	return []fuzzKind{
		newFuzzKind("trend", trails, func() (*analysis.Trend, error) { return analysis.NewTrend(trend) },
			func(b []byte) (*analysis.Trend, error) { return analysis.DecodeTrend(trend, b) },
			func(a *analysis.Trend) any { return a.Result(nil) }),
		newFuzzKind("funnel", trails, func() (*analysis.Funnel, error) { return analysis.NewFunnel(funnel, fopt) },
			func(b []byte) (*analysis.Funnel, error) { return analysis.DecodeFunnel(funnel, fopt, b) },
			func(a *analysis.Funnel) any {
				res := a.Result(nil)
				lists := [][]string{listed(&res.List)}
				for i := range res.Groups {
					lists = append(lists, listed(&res.Groups[i].List))
				}
				return []any{res, lists}
			}),
		newFuzzKind("retention", trails, func() (*analysis.Retention, error) { return analysis.NewRetention(ret) },
			func(b []byte) (*analysis.Retention, error) { return analysis.DecodeRetention(ret, b) },
			func(a *analysis.Retention) any {
				res := a.Result(nil)
				var lists [][]string
				for i := range res.Groups {
					lists = append(lists, listed(&res.Groups[i].List))
				}
				return []any{res, lists}
			}),
		newFuzzKind("stickiness", trails, func() (*analysis.Stickiness, error) { return analysis.NewStickiness(stick) },
			func(b []byte) (*analysis.Stickiness, error) { return analysis.DecodeStickiness(stick, b) },
			func(a *analysis.Stickiness) any { res := a.Result(); return []any{listed(&res.List), res} }),
		newFuzzKind("lifecycle", trails, func() (*analysis.Lifecycle, error) { return analysis.NewLifecycle(life) },
			func(b []byte) (*analysis.Lifecycle, error) { return analysis.DecodeLifecycle(life, b) },
			func(a *analysis.Lifecycle) any { res := a.Result(); return []any{listed(&res.List), res} }),
		newFuzzKind("paths", pc.trails, func() (*analysis.Paths, error) { return analysis.NewPaths(paths) },
			func(b []byte) (*analysis.Paths, error) { return analysis.DecodePaths(paths, b) },
			func(a *analysis.Paths) any { res := a.Result(); return []any{listed(&res.List), res} }),
		newFuzzKind("attribution", ac.trails, func() (*analysis.Attribution, error) { return analysis.NewAttribution(attr) },
			func(b []byte) (*analysis.Attribution, error) { return analysis.DecodeAttribution(attr, b) },
			func(a *analysis.Attribution) any { res := a.Result(); return []any{listed(&res.List), res} }),
		{
			name: "user list",
			decode: func(b []byte) (any, []byte, error) {
				l, err := analysis.DecodeUserList(3, b)
				if err != nil {
					return nil, nil, err
				}
				enc, err := l.AppendBinary(nil)
				return listed(&l), enc, err
			},
			states: func() [][]byte {
				l := analysis.UserList{Keep: 3}
				for _, id := range []string{"u9", "u1", "b", "a7", "zz"} {
					l.Add([]byte(id))
				}
				enc, _ := l.AppendBinary(nil)
				return [][]byte{enc}
			},
		},
		{
			name: "cohort",
			decode: func(b []byte) (any, []byte, error) {
				s, err := analysis.DecodeCohortState(&cohort, b)
				if err != nil {
					return nil, nil, err
				}
				enc, err := s.AppendBinary(nil)
				return []bool{s.In(0), s.In(1)}, enc, err
			},
			states: func() [][]byte {
				var out [][]byte
				s := analysis.NewCohortState(&cohort)
				for i := range trails {
					s.Add(&trails[i].Trail)
					enc, _ := s.AppendBinary(nil)
					out = append(out, enc)
				}
				return out
			},
		},
	}
}

// FuzzDecodeState feeds arbitrary bytes to the decoders of every kind
// (the first byte picks the kind): a decoder must return an error or a
// state whose result and re-encoding decode again to the same result,
// never panic or allocate out of proportion to its input.
func FuzzDecodeState(f *testing.F) {
	kinds := fuzzKinds()
	for i, k := range kinds {
		for _, s := range k.states() {
			f.Add(append([]byte{byte(i)}, s...))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		k := kinds[int(in[0])%len(kinds)]
		res, enc, err := k.decode(in[1:])
		if err != nil {
			return
		}
		res2, _, err := k.decode(enc)
		if err != nil {
			t.Fatalf("%s: re-encoded state does not decode: %v", k.name, err)
		}
		if fmt.Sprint(res) != fmt.Sprint(res2) { // NaN ≠ NaN for DeepEqual
			t.Fatalf("%s: re-encoded state has another result\n%+v\n%+v", k.name, res, res2)
		}
	})
}
