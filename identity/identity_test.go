package identity

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/bin"
)

func id(t, o string) Op    { return Op{Kind: Identify, T: t, O: o} }
func alias(t, o string) Op { return Op{Kind: Alias, T: t, O: o} }
func merge(t, o string) Op { return Op{Kind: Merge, T: t, O: o} }

// want is what one id's person should be after a test's ops.
type want struct {
	id         string
	personID   string
	ids        string // space-separated, sorted
	identified bool
}

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ops      []Op
		outcomes []Outcome
		persons  []want
		reason   string // substring of the last refusal's reason
	}{
		{"identify self marks", []Op{id("u", "u")}, []Outcome{Marked},
			[]want{{"u", "u", "u", true}}, ""},
		{"identify self twice is a noop", []Op{id("u", "u"), id("u", "u")}, []Outcome{Marked, Noop},
			[]want{{"u", "u", "u", true}}, ""},
		{"identify merges anonymous", []Op{id("u", "a")}, []Outcome{Merged},
			[]want{{"a", "u", "a u", true}}, ""},
		{"identify again is a noop", []Op{id("u", "a"), id("u", "a")}, []Outcome{Merged, Noop},
			[]want{{"u", "u", "a u", true}}, ""},
		{"identify same person not identified marks", []Op{merge("a", "u"), id("u", "a")}, []Outcome{Merged, Marked},
			[]want{{"a", "u", "a u", true}}, ""},
		{"identify into identified T merges", []Op{id("u", "u"), id("u", "a"), id("u", "b")}, []Outcome{Marked, Merged, Merged},
			[]want{{"b", "u", "a b u", true}}, ""},
		{"identify refused when A identified", []Op{id("v", "a"), id("u", "a")}, []Outcome{Merged, Refused},
			[]want{{"a", "v", "a v", true}, {"u", "u", "u", true}}, `A "a" is in person "v"`},
		{"identify refused still marks T", []Op{id("a", "a"), id("u", "a")}, []Outcome{Marked, Refused},
			[]want{{"a", "a", "a", true}, {"u", "u", "u", true}}, "identified"},
		{"identify refused with T identified", []Op{id("u", "u"), id("a", "a"), id("u", "a")}, []Outcome{Marked, Marked, Refused},
			[]want{{"a", "a", "a", true}, {"u", "u", "u", true}}, `person "a"`},
		{"identify allowed when T's person is A's", []Op{id("u", "a"), id("u", "a"), id("a", "u")}, []Outcome{Merged, Noop, Noop},
			[]want{{"a", "u", "a u", true}}, ""},
		{"identify: T identified, A not: merges", []Op{id("u", "u"), merge("a", "b"), id("u", "a")}, []Outcome{Marked, Merged, Merged},
			[]want{{"b", "u", "a b u", true}}, ""},
		{"alias neither identified", []Op{alias("t", "o")}, []Outcome{Merged},
			[]want{{"o", "t", "o t", true}}, ""},
		{"alias one identified (O)", []Op{id("o", "o"), alias("t", "o")}, []Outcome{Marked, Merged},
			[]want{{"t", "o", "o t", true}}, ""},
		{"alias one identified (T)", []Op{id("t", "t"), alias("t", "o")}, []Outcome{Marked, Merged},
			[]want{{"o", "t", "o t", true}}, ""},
		{"alias both identified refused", []Op{id("t", "t"), id("o", "o"), alias("t", "o")}, []Outcome{Marked, Marked, Refused},
			[]want{{"o", "o", "o", true}, {"t", "t", "t", true}}, `T "t" is in person "t", O "o" in person "o"`},
		{"alias same person marks", []Op{merge("t", "o"), alias("o", "t"), alias("t", "o")}, []Outcome{Merged, Marked, Noop},
			[]want{{"t", "o", "o t", true}}, ""},
		{"alias self", []Op{alias("t", "t")}, []Outcome{Marked},
			[]want{{"t", "t", "t", true}}, ""},
		{"merge forced", []Op{id("t", "t"), id("o", "o"), merge("o", "t")}, []Outcome{Marked, Marked, Merged},
			[]want{{"o", "t", "o t", true}}, ""},
		{"merge marks nothing", []Op{merge("t", "o")}, []Outcome{Merged},
			[]want{{"o", "t", "o t", false}}, ""},
		{"merge same person noop", []Op{merge("t", "o"), merge("o", "t"), merge("x", "x")}, []Outcome{Merged, Noop, Noop},
			[]want{{"o", "t", "o t", false}, {"x", "", "", false}}, ""},
		{"person id: earliest join across merges", []Op{merge("b", "c"), merge("a", "d"), merge("d", "c")}, []Outcome{Merged, Merged, Merged},
			[]want{{"a", "b", "a b c d", false}}, ""},
		{"person id: identified beats joined", []Op{merge("b", "c"), alias("d", "e"), merge("e", "c")}, []Outcome{Merged, Merged, Merged},
			[]want{{"b", "d", "b c d e", true}}, ""},
		{"person id: earliest identified", []Op{id("x", "x"), merge("b", "c"), id("y", "y"), merge("y", "c"), merge("x", "b")}, []Outcome{Marked, Merged, Marked, Merged, Merged},
			[]want{{"c", "x", "b c x y", true}}, ""},
		{"person id: marking a joined person", []Op{merge("b", "c"), id("c", "c")}, []Outcome{Merged, Marked},
			[]want{{"b", "c", "b c", true}}, ""},
		{"refusal does not merge", []Op{id("u", "a"), id("v", "v"), alias("v", "u")}, []Outcome{Merged, Marked, Refused},
			[]want{{"a", "u", "a u", true}, {"v", "v", "v", true}}, "both persons are identified"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New()
			outs := make([]Outcome, len(tc.ops))
			if err := g.Apply(tc.ops, outs); err != nil {
				t.Fatal(err)
			}
			for i, o := range outs {
				if o != tc.outcomes[i] {
					t.Errorf("op %d %v: outcome %v, want %v", i, tc.ops[i], o, tc.outcomes[i])
				}
			}
			s := g.Snapshot()
			for _, w := range tc.persons {
				p := s.LookupString(w.id)
				if w.personID == "" {
					if p != nil {
						t.Errorf("%s: person %+v, want none", w.id, p)
					}
					continue
				}
				if p == nil {
					t.Fatalf("%s: no person", w.id)
				}
				if p.ID != w.personID || strings.Join(p.DistinctIDs, " ") != w.ids || p.Identified != w.identified {
					t.Errorf("%s: person %q %q identified %v, want %q %q %v", w.id, p.ID, p.DistinctIDs, p.Identified, w.personID, w.ids, w.identified)
				}
			}
			refused := 0
			for _, o := range tc.outcomes {
				if o == Refused {
					refused++
				}
			}
			if int(s.Refused()) != refused || len(s.Refusals()) != refused {
				t.Errorf("refused %d, %d listed; want %d", s.Refused(), len(s.Refusals()), refused)
			}
			if tc.reason != "" && !strings.Contains(s.Refusals()[refused-1].Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", s.Refusals()[refused-1].Reason, tc.reason)
			}
			// The same ops one per Apply give the same graph.
			g1 := New()
			for _, op := range tc.ops {
				if err := g1.Apply([]Op{op}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if a, b := dump(s), dump(g1.Snapshot()); a != b {
				t.Errorf("one op per Apply:\n%s\nwant\n%s", b, a)
			}
		})
	}
}

// dump renders every person of s, in key order.
func dump(s *Snapshot) string {
	var b strings.Builder
	s.Persons(func(p *Person) bool {
		b.WriteString(strings.Join([]string{p.ID, strings.Join(p.DistinctIDs, ","), map[bool]string{true: "identified"}[p.Identified]}, " "))
		b.WriteByte('\n')
		return true
	})
	return b.String()
}

func TestValidate(t *testing.T) {
	for _, op := range []Op{
		{Kind: 0, T: "a", O: "b"},
		{Kind: Merge + 1, T: "a", O: "b"},
		{Kind: Identify, T: "", O: "b"},
		{Kind: Alias, T: "a", O: ""},
		{Kind: Merge, T: "a", O: "\xff"},
		{Kind: Merge, T: strings.Repeat("x", MaxIDBytes+1), O: "b"},
	} {
		if op.Validate() == nil {
			t.Errorf("%+v: valid", op)
		}
		g := New()
		if err := g.Apply([]Op{id("u", "a"), op}, nil); err == nil {
			t.Errorf("%+v: applied", op)
		}
		if g.Snapshot().Recorded() != 0 {
			t.Errorf("%+v: something applied", op)
		}
	}
	if err := (Op{Kind: Merge, T: strings.Repeat("x", MaxIDBytes), O: "é"}).Validate(); err != nil {
		t.Error(err)
	}
	if err := New().Apply([]Op{id("u", "a")}, make([]Outcome, 2)); err == nil {
		t.Error("wrong outcomes length accepted")
	}
}

func TestStatsAndRefusals(t *testing.T) {
	g := New()
	var ops []Op
	for i := range 1500 {
		ops = append(ops, id("u", "u"), id("a", "a"), id("u", "a"))
		_ = i
	}
	if err := g.Apply(ops, nil); err != nil {
		t.Fatal(err)
	}
	s := g.Snapshot()
	st := s.Stats()
	if st.Refused != 1500 || st.Recorded != 1502 || st.Ids != 2 || st.Persons != 2 || st.Joined != 0 || s.Joined() {
		t.Errorf("stats %+v", st)
	}
	r := s.Refusals()
	if len(r) != MaxRefusals || r[0].Seq != 503 || r[len(r)-1].Seq != 1502 {
		t.Errorf("%d refusals, seqs %d..%d", len(r), r[0].Seq, r[len(r)-1].Seq)
	}
	if err := g.Apply([]Op{merge("a", "b")}, nil); err != nil {
		t.Fatal(err)
	}
	s2 := g.Snapshot()
	if !s2.Joined() || s2.Stats().Joined != 1 || s2.Stats().Ids != 3 || s2.Stats().MemoryBytes == 0 {
		t.Errorf("stats %+v", s2.Stats())
	}
	if got := g.RecordedOps(1500, 1600); len(got) != 3 || got[2] != merge("a", "b") {
		t.Errorf("RecordedOps: %v", got)
	}
	if got := g.RecordedOps(5, 5); got != nil {
		t.Errorf("RecordedOps empty: %v", got)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	g := New()
	if err := g.Apply([]Op{id("u", "a"), merge("x", "y")}, nil); err != nil {
		t.Fatal(err)
	}
	s := g.Snapshot()
	before := dump(s)
	p := s.LookupString("a")
	if err := g.Apply([]Op{id("u", "b"), merge("y", "a"), id("z", "z"), alias("z", "u")}, nil); err != nil {
		t.Fatal(err)
	}
	if dump(s) != before || s.LookupString("a") != p || s.LookupString("b") != nil || s.Recorded() != 2 {
		t.Errorf("snapshot changed:\n%s\nwas\n%s", dump(s), before)
	}
	if got := strings.Join(g.Snapshot().LookupString("b").DistinctIDs, " "); got != "a b u x y" {
		t.Errorf("after: %q", got)
	}

	// Concurrent readers while a writer applies (run with -race).
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := g.Snapshot()
				n := s.Recorded()
				if p := s.LookupString("u"); p == nil || len(p.DistinctIDs) < 5 {
					t.Error("lost u")
					return
				}
				s.Persons(func(p *Person) bool { _ = len(p.DistinctIDs); return true })
				if s.Recorded() != n {
					t.Error("snapshot moved")
					return
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 150 {
				a := fmt.Sprintf("%d-%d", w, i)
				if err := g.Apply([]Op{id("u", "n"+a), merge("m"+a, "u")}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if n := len(g.Snapshot().LookupString("u").DistinctIDs); n != 5+600 {
		t.Errorf("u has %d ids, want %d", n, 5+600)
	}
}

func TestDecodeOpsErrors(t *testing.T) {
	good := AppendOp(nil, Op{Kind: Alias, T: "t", O: "o", Time: -5})
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"truncated", good[:len(good)-1]},
		{"truncated id", good[:3]},
		{"unknown kind", append([]byte{9}, good[1:]...)},
		{"zero kind", append([]byte{0}, good[1:]...)},
		{"overlong varint", append(good[:len(good)-1:len(good)-1], 0x89, 0x00)},
		{"empty T", AppendOp(nil, Op{Kind: Alias, T: "", O: "o"})},
		{"bad utf-8", AppendOp(nil, Op{Kind: Alias, T: "\xfe", O: "o"})},
		{"long id", AppendOp(nil, Op{Kind: Alias, T: strings.Repeat("x", MaxIDBytes+1), O: "o"})},
	} {
		b := append(append([]byte{}, good...), tc.b...)
		err := DecodeOps(b, func(Op) error { return nil })
		if !errors.Is(err, ErrOps) || !errors.Is(err, bin.ErrCorruption) || !strings.Contains(err.Error(), "offset") {
			t.Errorf("%s: %v", tc.name, err)
		}
		if _, err := Replay(b); !errors.Is(err, ErrOps) {
			t.Errorf("%s: replay: %v", tc.name, err)
		}
	}
	stop := errors.New("stop")
	if err := DecodeOps(good, func(Op) error { return stop }); err != stop {
		t.Errorf("fn's error: %v", err)
	}
}

func FuzzDecodeOps(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendOp(nil, Op{Kind: Identify, T: "u", O: "a", Time: 1700000000000000}))
	f.Add(AppendOp(AppendOp(nil, Op{Kind: Alias, T: "t", O: "é", Time: -1}), Op{Kind: Merge, T: "x", O: "x"}))
	f.Add([]byte{1, 1, 'u', 0, 0})
	f.Add([]byte{3, 0x80, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		var out []byte
		var ops []Op
		err := DecodeOps(b, func(op Op) error {
			out = AppendOp(out, op)
			ops = append(ops, op)
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrOps) {
				t.Fatalf("error %v does not match ErrOps", err)
			}
			return
		}
		if string(out) != string(b) {
			t.Fatalf("re-encoded %x, decoded from %x", out, b)
		}
		if err := New().Apply(ops, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestKeys(t *testing.T) {
	g := New()
	key := func(x string) uint32 { return g.Snapshot().LookupString(x).Key }
	apply := func(ops ...Op) {
		t.Helper()
		if err := g.Apply(ops, nil); err != nil {
			t.Fatal(err)
		}
	}
	apply(merge("a", "b")) // a=1 b=2: a tie, the smaller key survives
	if key("b") != 1 {
		t.Errorf("tie: key %d, want 1", key("b"))
	}
	apply(merge("c", "a")) // c=3 joins the larger person
	if key("c") != 1 {
		t.Errorf("larger: key %d, want 1", key("c"))
	}
	apply(merge("x", "y"), merge("z", "x"), merge("w", "z")) // x=4 y=5 z=6 w=7: 4 ids under 4
	apply(id("a", "w"))                                      // 3 ids under 1 join 4 under 4
	if key("a") != 4 || key("b") != 4 {
		t.Errorf("larger survives: key %d", key("a"))
	}
	n := 0
	g.Snapshot().Persons(func(p *Person) bool { n++; return p.Key == 4 })
	if n != 1 {
		t.Errorf("%d persons", n)
	}
}
