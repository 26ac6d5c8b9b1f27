package identity

import (
	"os"
	"runtime"
	"strconv"
	"testing"
)

// build returns a graph of n ids: n/2 persons, each an account identified
// with one anonymous id (identify(uI, aI)), applied in batches of 64k.
func build(tb testing.TB, n int) *Graph {
	g := New()
	ops := make([]Op, 0, 1<<16)
	for i := range n / 2 {
		ops = append(ops, Op{Kind: Identify, T: "user-" + strconv.Itoa(i), O: "anon-" + strconv.Itoa(i)})
		if len(ops) == cap(ops) {
			if err := g.Apply(ops, nil); err != nil {
				tb.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	if err := g.Apply(ops, nil); err != nil {
		tb.Fatal(err)
	}
	return g
}

func TestLookupAllocs(t *testing.T) {
	g := build(t, 1000)
	s := g.Snapshot()
	hit, miss := []byte("anon-7"), []byte("nobody")
	if n := testing.AllocsPerRun(100, func() {
		if s.Lookup(hit) == nil || s.Lookup(miss) != nil || s.LookupString("user-3") == nil {
			t.Fatal("lookup")
		}
	}); n != 0 {
		t.Errorf("%v allocations per lookup", n)
	}
}

// BenchmarkApplyIdentify: a fresh anonymous id identified into an
// identified person, one op per Apply (live ingestion's shape).
func BenchmarkApplyIdentify(b *testing.B) {
	g := build(b, 1000)
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = "fresh-" + strconv.Itoa(i)
	}
	users := make([]string, 500)
	for i := range users {
		users[i] = "user-" + strconv.Itoa(i)
	}
	ops := make([]Op, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ops[0] = Op{Kind: Identify, T: users[i%500], O: ids[i]}
		if err := g.Apply(ops, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApplyNoop: identify(T, A) of ids already one identified person.
func BenchmarkApplyNoop(b *testing.B) {
	g := build(b, 1000)
	ops := []Op{{Kind: Identify, T: "user-7", O: "anon-7"}}
	b.ReportAllocs()
	for b.Loop() {
		if err := g.Apply(ops, nil); err != nil {
			b.Fatal(err)
		}
	}
}

var million *Graph

func millionGraph(b *testing.B) *Graph {
	if million == nil {
		million = build(b, 1_000_000)
	}
	return million
}

func BenchmarkLookupHit(b *testing.B)  { benchLookup(b, "anon-", true) }
func BenchmarkLookupMiss(b *testing.B) { benchLookup(b, "device-", false) }

// benchLookup looks up 1024 ids of prefix in the 1M-id graph; hit says
// whether they are in it.
func benchLookup(b *testing.B, prefix string, hit bool) {
	s := millionGraph(b).Snapshot()
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = []byte(prefix + strconv.Itoa(i*487))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if (s.Lookup(keys[i&1023]) != nil) != hit {
			b.Fatal("wrong answer")
		}
	}
}

// BenchmarkMemory reports the heap in use of a graph of SPUR_IDENTITY_IDS
// ids (default 1M) built as in build, and Stats' estimate of it.
func BenchmarkMemory(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("SPUR_IDENTITY_IDS")); err == nil {
		n = v
	}
	for b.Loop() {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		g := build(b, n)
		runtime.GC()
		runtime.ReadMemStats(&m1)
		st := g.Snapshot().Stats()
		b.ReportMetric(float64(m1.HeapInuse-m0.HeapInuse)/float64(n), "heapB/id")
		b.ReportMetric(float64(st.MemoryBytes)/float64(n), "statsB/id")
		runtime.KeepAlive(g)
	}
}
