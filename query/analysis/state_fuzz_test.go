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

func fuzzKinds() []fuzzKind {
	bounds := timebucket.Bounds(1616716800000000, 1617062400000000, timebucket.Day, time.UTC, 0)
	trails, dict := fuzzData([]string{"a", "b", "c|d"})
	trend := analysis.TrendSpec{Bounds: bounds, From: bounds[0], To: bounds[len(bounds)-1],
		Breakdown: analysis.KeySource{From: analysis.KeyEvent, Index: 0, Dict: dict},
		Series: []analysis.TrendSeries{{Math: analysis.MathUsers}, {Math: analysis.MathP90, Bit: 1, Col: 2, Float: true},
			{Math: analysis.MathSum, Bit: 2, Col: 1}, {Math: analysis.MathCountPerUserMedian, Bit: 3}, {Math: analysis.MathWAU, Bit: 4}}}
	ftrails, fdict := fuzzData([]string{"a", "b", "c", "d"})
	funnel := analysis.FunnelSpec{Steps: 3, Window: 86400e6, From: bounds[0], To: bounds[len(bounds)-1],
		Exclusions: []analysis.FunnelExclusion{{Bit: 3, From: 1, To: 2}}}
	fopt := analysis.FunnelOptions{Key: analysis.KeySource{From: analysis.KeyEvent, Index: 0, Dict: fdict},
		Attribution: analysis.AttrAllSteps, List: &analysis.FunnelList{Step: 2, Keep: 3}}
	rtrails, rdict := fuzzData([]string{"a", "b|c"})
	rb := timebucket.Extend(bounds, 3, timebucket.Day, time.UTC, 0)
	ret := analysis.RetentionSpec{Bounds: rb, Periods: 3, From: bounds[0], To: bounds[len(bounds)-1],
		Breakdown: analysis.KeySource{From: analysis.KeyEvent, Index: 0, Dict: rdict}, List: &analysis.RetentionList{Cohort: 1, Keep: 2}}
	return []fuzzKind{{
		name: "retention",
		decode: func(b []byte) (any, []byte, error) {
			r, err := analysis.DecodeRetention(ret, b)
			if err != nil {
				return nil, nil, err
			}
			enc, err := r.AppendBinary(nil)
			res := r.Result(nil)
			var lists [][]string
			for i := range res.Groups {
				lists = append(lists, listed(&res.Groups[i].List))
			}
			return []any{res, lists}, enc, err
		},
		states: func() [][]byte {
			return fuzzStates(func() (*analysis.Retention, error) { return analysis.NewRetention(ret) }, rtrails)
		},
	}, {
		name: "funnel",
		decode: func(b []byte) (any, []byte, error) {
			f, err := analysis.DecodeFunnel(funnel, fopt, b)
			if err != nil {
				return nil, nil, err
			}
			enc, err := f.AppendBinary(nil)
			res := f.Result(nil)
			lists := [][]string{listed(&res.List)}
			for i := range res.Groups {
				lists = append(lists, listed(&res.Groups[i].List))
			}
			return []any{res, lists}, enc, err
		},
		states: func() [][]byte {
			return fuzzStates(func() (*analysis.Funnel, error) { return analysis.NewFunnel(funnel, fopt) }, ftrails)
		},
	}, {
		name: "trend",
		decode: func(b []byte) (any, []byte, error) {
			t, err := analysis.DecodeTrend(trend, b)
			if err != nil {
				return nil, nil, err
			}
			enc, err := t.AppendBinary(nil)
			return t.Result(nil), enc, err
		},
		states: func() [][]byte {
			return fuzzStates(func() (*analysis.Trend, error) { return analysis.NewTrend(trend) }, trails)
		},
	}}
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
