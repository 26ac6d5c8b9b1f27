package userfold

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// num is the test's value: a number, or a string when str is set.
type num struct {
	n   float64
	str string
}

func addNum(cur, d num) (num, bool) {
	if cur.str != "" {
		return cur, false
	}
	return num{n: cur.n + d.n}, true
}

func (v num) String() string {
	if v.str != "" {
		return v.str
	}
	return fmt.Sprint(v.n)
}

func w(t int64, op Op, v any) Write[num] {
	x := Write[num]{Time: t, Op: op}
	switch v := v.(type) {
	case string:
		x.Value.str = v
	case float64:
		x.Value.n = v
	case int:
		x.Value.n = float64(v)
	}
	return x
}

func show(v num, set bool) string {
	if !set {
		return "unset"
	}
	return v.String()
}

// TestFoldGolden pins the fold of docs/identity.md §3: writes sorted by time,
// set replaces, set_once sets if unset, unset clears, add adds to a
// number (0 when unset), delete unsets.
func TestFoldGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   []Write[num]
		want string
	}{
		{"empty", nil, "unset"},
		{"latest set wins", []Write[num]{w(2, Set, "b"), w(1, Set, "a")}, "b"},
		{"set beats set_once before it", []Write[num]{w(1, SetOnce, "o"), w(2, Set, "s")}, "s"},
		{"set_once after set is ignored", []Write[num]{w(1, Set, "s"), w(2, SetOnce, "o")}, "s"},
		{"earliest set_once", []Write[num]{w(3, SetOnce, "late"), w(2, SetOnce, "early")}, "early"},
		{"unset clears", []Write[num]{w(1, Set, "s"), w(2, Unset, nil)}, "unset"},
		{"unset before set", []Write[num]{w(2, Set, "s"), w(1, Unset, nil)}, "s"},
		{"set_once after unset applies", []Write[num]{w(1, Set, "s"), w(2, Unset, nil), w(3, SetOnce, "o")}, "o"},
		{"set_once before unset is cleared", []Write[num]{w(1, SetOnce, "o"), w(2, Unset, nil)}, "unset"},
		{"add to unset starts at 0", []Write[num]{w(1, Add, 5)}, "5"},
		{"adds sum", []Write[num]{w(1, Add, 5), w(2, Add, -2), w(3, Add, 0.5)}, "3.5"},
		{"add to a set number", []Write[num]{w(1, Set, 10), w(2, Add, 1)}, "11"},
		{"add before a set is lost", []Write[num]{w(1, Add, 7), w(2, Set, 10)}, "10"},
		{"add to a string is ignored", []Write[num]{w(1, Set, "x"), w(2, Add, 1)}, "x"},
		{"add after unset restarts at 0", []Write[num]{w(1, Set, 10), w(2, Unset, nil), w(3, Add, 2)}, "2"},
		{"add then set_once: set_once finds it set", []Write[num]{w(1, Add, 2), w(2, SetOnce, 100)}, "2"},
		{"set_once then add", []Write[num]{w(1, SetOnce, 100), w(2, Add, 2)}, "102"},
		{"delete clears", []Write[num]{w(1, Set, "s"), w(2, Delete, nil)}, "unset"},
		{"set after delete", []Write[num]{w(3, Set, "t"), w(2, Delete, nil), w(1, Set, "s")}, "t"},
		{"add after delete", []Write[num]{w(1, Add, 4), w(2, Delete, nil), w(3, Add, 1)}, "1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := show(Fold(slices.Clone(tc.ws), addNum)); got != tc.want {
				t.Errorf("Fold = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFoldTies: writes at one time apply in Rank order, then slice order.
func TestFoldTies(t *testing.T) {
	a, b := w(1, Set, "a"), w(1, Set, "b")
	a.Rank, b.Rank = 2, 1
	if got := show(Fold([]Write[num]{a, b}, addNum)); got != "a" {
		t.Errorf("greater rank should apply last: got %s", got)
	}
	// Same (Time, Rank): slice order, so the later set wins and the
	// earlier set_once wins.
	if got := show(Fold([]Write[num]{w(1, Set, "x"), w(1, Set, "y")}, addNum)); got != "y" {
		t.Errorf("equal keys: later set should win, got %s", got)
	}
	if got := show(Fold([]Write[num]{w(1, SetOnce, "x"), w(1, SetOnce, "y")}, addNum)); got != "x" {
		t.Errorf("equal keys: earlier set_once should win, got %s", got)
	}
	u := w(1, Unset, nil)
	u.Rank = 1
	if got := show(Fold([]Write[num]{u, w(1, Set, "s")}, addNum)); got != "unset" {
		t.Errorf("unset of greater rank should clear a set at the same time: got %s", got)
	}
}

// naive applies ws in their order, with no sort and no shortcut.
func naive(ws []Write[num]) (num, bool) {
	var v num
	set := false
	for _, x := range ws {
		switch x.Op {
		case Set:
			v, set = x.Value, true
		case SetOnce:
			if !set {
				v, set = x.Value, true
			}
		case Unset, Delete:
			v, set = num{}, false
		case Add:
			if !set {
				v, set = num{}, true
			}
			if s, ok := addNum(v, x.Value); ok {
				v = s
			}
		}
	}
	return v, set
}

func randomWrites(r *rand.Rand, n int) []Write[num] {
	ws := make([]Write[num], n)
	for i := range ws {
		x := Write[num]{Time: int64(r.IntN(8)), Rank: int64(i), Op: Op(r.IntN(int(NumOps)))}
		switch {
		case x.Op == Add:
			x.Value.n = float64(r.IntN(9) - 4)
		case r.IntN(3) == 0:
			x.Value.str = fmt.Sprint("s", r.IntN(4))
		default:
			x.Value.n = float64(r.IntN(100))
		}
		ws[i] = x
	}
	return ws
}

// TestFoldOrderIndependent: any arrival order of the same writes (keys
// distinct) folds to the value of applying them in (Time, Rank) order.
func TestFoldOrderIndependent(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 3))
	for it := range 2000 {
		ws := randomWrites(r, r.IntN(12))
		sorted := slices.Clone(ws)
		slices.SortFunc(sorted, func(a, b Write[num]) int {
			if a.Time != b.Time {
				return int(a.Time - b.Time)
			}
			return int(a.Rank - b.Rank)
		})
		wv, wset := naive(sorted)
		want := show(wv, wset)
		for range 3 {
			r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
			if got := show(Fold(slices.Clone(ws), addNum)); got != want {
				t.Fatalf("iteration %d: Fold(%v) = %s, naive %s", it, ws, got, want)
			}
		}
	}
}

// TestFoldSimpleIsLatestSetElseEarliestOnce: with only Set and SetOnce
// writes the fold is the rule the scan applies without sorting (the
// latest set, a tie to the later; else the earliest set-once, a tie to
// the earlier), so users without other writes keep that fast path.
func TestFoldSimpleIsLatestSetElseEarliestOnce(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 4))
	for range 2000 {
		ws := randomWrites(r, r.IntN(10))
		for i := range ws {
			ws[i].Op = Op(r.IntN(2))
			ws[i].Rank = 0 // ties go by slice (arrival) order
		}
		var best, once *Write[num]
		for i := range ws {
			x := &ws[i]
			if x.Op == Set && (best == nil || x.Time >= best.Time) {
				best = x
			}
			if x.Op == SetOnce && (once == nil || x.Time < once.Time) {
				once = x
			}
		}
		want := "unset"
		if best != nil {
			want = best.Value.String()
		} else if once != nil {
			want = once.Value.String()
		}
		if got := show(Fold(slices.Clone(ws), addNum)); got != want {
			t.Fatalf("Fold(%v) = %s, latest-set-else-earliest-once %s", ws, got, want)
		}
	}
}

func TestFoldAllocs(t *testing.T) {
	ws := randomWrites(rand.New(rand.NewPCG(1, 2)), 64)
	buf := make([]Write[num], len(ws))
	if n := testing.AllocsPerRun(100, func() {
		copy(buf, ws)
		Fold(buf, addNum)
	}); n != 0 {
		t.Errorf("Fold allocates %v times per call", n)
	}
}

func TestOpString(t *testing.T) {
	var got []string
	for o := range NumOps + 1 {
		got = append(got, o.String())
	}
	if want := []string{"set", "set_once", "unset", "add", "delete", "op(5)"}; !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
}
