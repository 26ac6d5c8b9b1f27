package analysis_test

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/trail"
)

// chunkKernel is the accumulator shape of the kernels that take chunked
// trails (stickiness, lifecycle, paths, attribution).
type chunkKernel[A any] interface {
	Add(*trail.Trail)
	Merge(A) error
	Bytes() int64
}

// sameForEveryChunking runs the kernel made by mk over whole trails and
// then over chunks of every length of chunkLens (each with the shard
// plan's random splits) and checks that result gives the same value each
// time; it returns the merged accumulator of whole trails.
func sameForEveryChunking[A chunkKernel[A], R any](t *testing.T, trails []testutil.UserTrail, plan *shardPlan, r *rand.Rand, mk func() (A, error), result func(A) R) A {
	t.Helper()
	var first A
	var want R
	for i, n := range append([]int{0}, chunkLens...) {
		acc := accumulate(t, trails, plan, feeder{r: r, maxLen: n}, mk)
		got := result(acc)
		if i == 0 {
			first, want = acc, got
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks of %d events: result\n%+v\nwhole trails:\n%+v", n, got, want)
		}
	}
	return first
}

// regroup draws the breakdown values a second pass keeps among labels
// and returns them, the pass's Group (kept keys stay, the others merge
// into otherKey; the keys of src in trails) and the labels of its result
// ("~other" for otherKey, as relabel names the merged rest).
func (d *diffCase) regroup(labels []string, label func(analysis.Key) string, trails []testutil.UserTrail, src analysis.KeySource) (map[string]bool, *analysis.KeyGroup, func(analysis.Key) string) {
	kept := d.pickKept(labels)
	group := &analysis.KeyGroup{Kept: keysWhere(trails, src, func(k analysis.Key) bool { return kept[label(k)] }), Other: otherKey}
	grouped := func(k analysis.Key) string {
		if k == otherKey {
			return "~other"
		}
		return label(k)
	}
	return kept, group, grouped
}

// noAllocs checks that adding n trails (add(i) adds trail i) does not
// allocate once an accumulator has seen them twice.
func noAllocs(t *testing.T, n int, add func(i int)) {
	t.Helper()
	all := func() {
		for i := range n {
			add(i)
		}
	}
	all()
	all()
	if a := testing.AllocsPerRun(20, all); a != 0 {
		t.Fatalf("Add allocates %.1f times per pass over %d trails", a, n)
	}
}

// keysWhere returns the distinct keys of source src in trails (event
// column values or user values) for which keep is true.
func keysWhere(trails []testutil.UserTrail, src analysis.KeySource, keep func(analysis.Key) bool) []analysis.Key {
	seen := map[analysis.Key]bool{}
	var out []analysis.Key
	add := func(k analysis.Key) {
		if !seen[k] {
			seen[k] = true
			if keep(k) {
				out = append(out, k)
			}
		}
	}
	for i := range trails {
		tr := &trails[i].Trail
		switch src.From {
		case analysis.KeyEvent:
			c := &tr.Cols[src.Index]
			for j := range tr.Times {
				add(analysis.Key{Bits: c.Bits[j], Set: c.Set[j]})
			}
		case analysis.KeyUser:
			add(tr.User[src.Index])
		default:
			add(analysis.Key{})
		}
	}
	return out
}
