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
	Merge(A)
	Bytes() int64
}

// chunkLens are the chunk sizes the tests feed trails in: whole trails
// (0), one tie group at a time (1), and a few more.
var chunkLens = []int{0, 1, 2, 3, 8, 64}

// runChunked builds one accumulator per shard of plan with mk, adds every
// trail to its shard's accumulator in chunks of about maxLen events (0:
// whole, as testutil.Chunks cuts them), merges the accumulators in the
// plan's order and returns the merged one.
func runChunked[A chunkKernel[A]](t testing.TB, trails []testutil.UserTrail, plan *shardPlan, r *rand.Rand, maxLen int, mk func() (A, error)) A {
	t.Helper()
	assign, shards, order := plan.split(len(trails))
	accs := make([]A, shards)
	for i := range accs {
		a, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		accs[i] = a
	}
	for i := range trails {
		tr := &trails[i].Trail
		if maxLen == 0 {
			accs[assign[i]].Add(tr)
			continue
		}
		for _, c := range testutil.Chunks(tr, r, maxLen) {
			accs[assign[i]].Add(&c)
		}
	}
	for _, s := range order[1:] {
		accs[order[0]].Merge(accs[s])
	}
	return accs[order[0]]
}

// sameForEveryChunking runs the kernel made by mk over trails with every
// chunk length of chunkLens (and the shard plan's random splits) and
// checks that result gives the same value each time; it returns the
// merged accumulator of whole trails.
func sameForEveryChunking[A chunkKernel[A], R any](t *testing.T, trails []testutil.UserTrail, plan *shardPlan, r *rand.Rand, mk func() (A, error), result func(A) R) A {
	t.Helper()
	var first A
	var want R
	for i, n := range chunkLens {
		acc := runChunked(t, trails, plan, r, n, mk)
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
// and returns them, the pass's Group function (kept keys stay, the others
// merge into otherKey) and the labels of its result ("~other" for
// otherKey, as relabel names the merged rest).
func (d *diffCase) regroup(labels []string, label func(analysis.Key) string) (map[string]bool, func(analysis.Key) (analysis.Key, bool), func(analysis.Key) string) {
	kept := d.pickKept(labels)
	group := func(k analysis.Key) (analysis.Key, bool) {
		if kept[label(k)] {
			return k, true
		}
		return otherKey, true
	}
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
