package identity_test

import (
	"fmt"
	"github.com/cespare/xxhash/v2"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/internal/testutil"
)

// randomOps returns n seeded random ops over an alphabet of k ids; long
// makes chains (op i joins id i and i+1) interleaved with random ops.
func randomOps(r *rand.Rand, n, k int, long bool) []identity.Op {
	ops := make([]identity.Op, n)
	for i := range ops {
		a, b := r.IntN(k), r.IntN(k)
		if long && r.IntN(2) == 0 {
			a, b = i%k, (i+1)%k
			if r.IntN(2) == 0 {
				a, b = b, a
			}
		}
		if r.IntN(8) == 0 {
			b = a
		}
		ops[i] = identity.Op{
			Kind: identity.Kind(1 + r.IntN(3)),
			T:    fmt.Sprintf("id%d", a),
			O:    fmt.Sprintf("id%d", b),
			Time: r.Int64N(1 << 50),
		}
	}
	return ops
}

// compare checks every id of the alphabet in s against the reference.
func compare(t *testing.T, what string, ref *testutil.NaivePersons, s *identity.Snapshot, k int) {
	t.Helper()
	joined := false
	for i := range k {
		x := fmt.Sprintf("id%d", i)
		pid, ids := ref.PersonOf(x)
		p := s.LookupString(x)
		if !ref.Known(x) {
			if p != nil {
				t.Fatalf("%s: %s: person %q %q, want none", what, x, p.ID, p.DistinctIDs)
			}
			continue
		}
		if p == nil {
			t.Fatalf("%s: %s: no person, want %q %q", what, x, pid, ids)
		}
		joined = joined || len(ids) > 1
		if len(ids) > 1 && !s.MayBeJoined(xxhash.Sum64String(x)) {
			t.Fatalf("%s: %s: in a joined person %q, but MayBeJoined says no", what, x, ids)
		}
		if p.ID != pid || !slices.Equal(p.DistinctIDs, ids) || p.Identified != ref.Identified(x) {
			t.Fatalf("%s: %s: person %q %q identified %v, want %q %q %v", what, x, p.ID, p.DistinctIDs, p.Identified, pid, ids, ref.Identified(x))
		}
		if s.LookupString(p.DistinctIDs[0]) != p {
			t.Fatalf("%s: %s: its ids point to different *Person", what, x)
		}
	}
	if int(s.Refused()) != ref.Refused() || int(s.Recorded()) != ref.Recorded() || s.Joined() != joined {
		t.Fatalf("%s: refused %d recorded %d joined %v, want %d %d %v", what, s.Refused(), s.Recorded(), s.Joined(), ref.Refused(), ref.Recorded(), joined)
	}
	n := 0
	s.Persons(func(p *identity.Person) bool {
		n += len(p.DistinctIDs)
		return true
	})
	if st := s.Stats(); n != int(st.Ids) {
		t.Fatalf("%s: persons hold %d ids, stats say %d", what, n, st.Ids)
	}
}

func TestDifferential(t *testing.T) {
	runs := 2400
	if testing.Short() {
		runs = 300
	}
	for seed := range runs {
		r := rand.New(rand.NewPCG(uint64(seed), 27))
		k := 2 + r.IntN(12)
		n := 1 + r.IntN(60)
		long := seed%4 == 3
		if long {
			k, n = 20+r.IntN(60), 100+r.IntN(200)
		}
		ops := randomOps(r, n, k, long)
		ref := &testutil.NaivePersons{}
		want := make([]identity.Outcome, len(ops))
		for i, op := range ops {
			want[i] = ref.Apply(op)
		}
		what := fmt.Sprintf("seed %d", seed)

		// Applied in random batches.
		g := identity.New()
		got := make([]identity.Outcome, len(ops))
		for i := 0; i < len(ops); {
			j := min(len(ops), i+1+r.IntN(8))
			if seed%2 == 0 {
				j = len(ops)
			}
			if err := g.Apply(ops[i:j], got[i:j]); err != nil {
				t.Fatal(err)
			}
			i = j
		}
		if !slices.Equal(got, want) {
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("%s: op %d %+v: outcome %v, want %v", what, i, ops[i], got[i], want[i])
				}
			}
		}
		s := g.Snapshot()
		compare(t, what, ref, s, k)

		// Recorded ops round trip through the encoding.
		rec := g.RecordedOps(0, s.Recorded())
		var b []byte
		for _, op := range rec {
			b = identity.AppendOp(b, op)
		}
		g2, err := identity.Replay(b)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		compare(t, what+" replayed", ref, g2.Snapshot(), k)
		if a, b := dumpKeys(s), dumpKeys(g2.Snapshot()); a != b {
			t.Fatalf("%s: replay differs:\n%s\nwant\n%s", what, b, a)
		}
		var dec []identity.Op
		if err := identity.DecodeOps(b, func(op identity.Op) error { dec = append(dec, op); return nil }); err != nil || !slices.Equal(dec, rec) {
			t.Fatalf("%s: decoded %v, %v", what, dec, err)
		}
		if !slices.Equal(g2.Snapshot().Refusals(), s.Refusals()) {
			t.Fatalf("%s: refusals differ after replay", what)
		}
	}
}

// dumpKeys renders s's persons with their keys.
func dumpKeys(s *identity.Snapshot) string {
	var b strings.Builder
	s.Persons(func(p *identity.Person) bool {
		fmt.Fprintf(&b, "%d %s %q %v\n", p.Key, p.ID, p.DistinctIDs, p.Identified)
		return true
	})
	return b.String()
}

// TestLongChain joins 20k ids one at a time onto one person and in a
// balanced tree, against the reference's answer for that shape.
func TestLongChain(t *testing.T) {
	const n = 20000
	g := identity.New()
	ops := make([]identity.Op, 0, n)
	for i := 1; i < n; i++ {
		ops = append(ops, identity.Op{Kind: identity.Merge, T: fmt.Sprintf("c%d", i), O: fmt.Sprintf("c%d", i-1)})
	}
	for i := 0; i < len(ops); i += 1000 {
		if err := g.Apply(ops[i:min(i+1000, len(ops))], nil); err != nil {
			t.Fatal(err)
		}
	}
	p := g.Snapshot().LookupString("c0")
	if len(p.DistinctIDs) != n || p.ID != "c1" || p.Identified || !slices.IsSorted(p.DistinctIDs) {
		t.Fatalf("chain: %d ids, id %q", len(p.DistinctIDs), p.ID)
	}
	if q := g.Snapshot().LookupString(fmt.Sprintf("c%d", n-1)); q != p {
		t.Fatal("chain ends are different persons")
	}
	// The join filter grew past its first size (8,192 ids) and kept them all.
	for i := range n {
		if !g.Snapshot().MayBeJoined(xxhash.Sum64String(fmt.Sprintf("c%d", i))) {
			t.Fatalf("c%d is joined, but MayBeJoined says no", i)
		}
	}
	if err := g.Apply([]identity.Op{{Kind: identity.Identify, T: "acct", O: "c77"}}, nil); err != nil {
		t.Fatal(err)
	}
	p = g.Snapshot().LookupString("c5")
	if p.ID != "acct" || !p.Identified || len(p.DistinctIDs) != n+1 {
		t.Fatalf("identified chain: %q %v %d", p.ID, p.Identified, len(p.DistinctIDs))
	}
}

// TestNoopPredicts: Snapshot.Noop says exactly which ops Apply will find
// to be no-ops, over random sequences.
func TestNoopPredicts(t *testing.T) {
	for seed := range 200 {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		g := identity.New()
		for range 60 {
			op := identity.Op{Kind: identity.Kind(1 + r.IntN(3)), T: fmt.Sprintf("id%d", r.IntN(8)), O: fmt.Sprintf("id%d", r.IntN(8))}
			predicted := g.Snapshot().Noop(op)
			out := make([]identity.Outcome, 1)
			if err := g.Apply([]identity.Op{op}, out); err != nil {
				t.Fatal(err)
			}
			if predicted != (out[0] == identity.Noop) {
				t.Fatalf("seed %d: %v %q %q: Noop said %v, Apply did %v", seed, op.Kind, op.T, op.O, predicted, out[0])
			}
		}
	}
}
