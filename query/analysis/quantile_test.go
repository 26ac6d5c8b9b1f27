package analysis_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/spurdb/spur/query/analysis"
)

// quantileLevels are the levels every differential case checks, plus
// one random level.
var quantileLevels = []float64{0, 0.01, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1}

// quantilePattern fills x with the values of one input shape.
type quantilePattern struct {
	name string
	fill func(r *rand.Rand, x []int64)
}

var quantilePatterns = []quantilePattern{
	{"random", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = int64(r.Uint64())
		}
	}},
	{"durations", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = logUniformMicros(r)
		}
	}},
	{"few-distinct", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = r.Int64N(4)
		}
	}},
	{"dups-heavy", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = r.Int64N(int64(1 + len(x)/16))
		}
	}},
	{"all-equal", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = 7
		}
	}},
	{"sorted", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = int64(i)
		}
	}},
	{"reverse-sorted", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = int64(len(x) - i)
		}
	}},
	{"organ-pipe", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = int64(min(i, len(x)-1-i))
		}
	}},
	{"sawtooth", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = int64(i % 37)
		}
	}},
	{"nearly-sorted", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = int64(i)
		}
		for range len(x) / 50 {
			i, j := r.IntN(len(x)), r.IntN(len(x))
			x[i], x[j] = x[j], x[i]
		}
	}},
	{"extremes", func(r *rand.Rand, x []int64) {
		for i := range x {
			x[i] = [...]int64{math.MinInt64, math.MaxInt64, 0, -1}[r.IntN(4)]
		}
	}},
}

// quantileSizes are the list lengths of the differential test: every
// length up to 70, then some around powers of two and larger.
func quantileSizes() []int {
	var n []int
	for i := range 71 {
		n = append(n, i)
	}
	return append(n, 127, 128, 129, 1000, 4097, 100_000)
}

// checkQuantileInt compares QuantileSelect on a copy of x with sort +
// Quantile, bit for bit, and checks that the selection only permuted x.
func checkQuantileInt(t *testing.T, x []int64, q float64) {
	t.Helper()
	sorted := slices.Clone(x)
	slices.Sort(sorted)
	want := analysis.Quantile(sorted, q)
	work := slices.Clone(x)
	got := analysis.QuantileSelect(work, q)
	if math.Float64bits(got) != math.Float64bits(want) {
		t.Fatalf("QuantileSelect(n=%d, q=%v) = %v, want %v (input %v)", len(x), q, got, want, head(x))
	}
	slices.Sort(work)
	if !slices.Equal(work, sorted) {
		t.Fatalf("QuantileSelect(n=%d, q=%v) changed the values, not only their order", len(x), q)
	}
}

// checkQuantileFloat is checkQuantileInt for QuantileSelectFloat against
// slices.Sort + QuantileFloat: the same bits, except that any NaN matches
// any NaN and, when x holds both -0 and +0, a zero matches a zero (the
// sort leaves their order unspecified).
func checkQuantileFloat(t *testing.T, x []float64, q float64) {
	t.Helper()
	sorted := slices.Clone(x)
	slices.Sort(sorted)
	want := analysis.QuantileFloat(sorted, q)
	work := slices.Clone(x)
	got := analysis.QuantileSelectFloat(work, q)
	same := math.Float64bits(got) == math.Float64bits(want) ||
		math.IsNaN(got) && math.IsNaN(want) ||
		got == 0 && want == 0 && slices.Contains(x, 0) && slices.ContainsFunc(x, func(v float64) bool { return v == 0 && math.Signbit(v) })
	if !same {
		t.Fatalf("QuantileSelectFloat(n=%d, q=%v) = %v, want %v (input %v)", len(x), q, got, want, head(x))
	}
	slices.Sort(work)
	for i := range work {
		if math.Float64bits(work[i]) != math.Float64bits(sorted[i]) && !(math.IsNaN(work[i]) && math.IsNaN(sorted[i])) && !(work[i] == 0 && sorted[i] == 0) {
			t.Fatalf("QuantileSelectFloat(n=%d, q=%v) changed the values, not only their order", len(x), q)
		}
	}
}

// head returns a prefix of x short enough for a failure message.
func head[T any](x []T) []T { return x[:min(len(x), 40)] }

// TestQuantileSelect: selection equals sort + Quantile, bit for bit, for
// every pattern, size and level, for int64 and (the same values as)
// float64.
func TestQuantileSelect(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, p := range quantilePatterns {
		t.Run(p.name, func(t *testing.T) {
			for _, n := range quantileSizes() {
				x := make([]int64, n)
				p.fill(r, x)
				f := make([]float64, n)
				for i, v := range x {
					f[i] = float64(v)
				}
				for _, q := range append(quantileLevels, r.Float64()) {
					checkQuantileInt(t, x, q)
					checkQuantileFloat(t, f, q)
				}
			}
		})
	}
}

// TestQuantileSelectFloatSpecial: NaN (sorted first by slices.Sort), ±Inf,
// signed zeros, subnormals and the extremes, in random mixes.
func TestQuantileSelectFloatSpecial(t *testing.T) {
	special := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1),
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64, 1, -1, 2.5}
	r := rand.New(rand.NewPCG(13, 14))
	for _, n := range quantileSizes() {
		for round := range 4 {
			x := make([]float64, n)
			for i := range x {
				switch {
				case round == 0: // only specials
					x[i] = special[r.IntN(len(special))]
				case r.IntN(8) == 0:
					x[i] = special[r.IntN(len(special))]
				default:
					x[i] = r.NormFloat64() * 1e3
				}
			}
			for _, q := range append(quantileLevels, r.Float64()) {
				checkQuantileFloat(t, x, q)
			}
		}
	}
}

// FuzzQuantileSelect compares QuantileSelect and QuantileSelectFloat with
// sort + Quantile on the 8-byte words of data (as int64 and as float64
// bits), reduced modulo mod when mod > 0 to make duplicates, at level
// level/65535. When size exceeds the number of words, the words repeat
// (the i-th repetition plus i) up to size values, so that long inputs
// with patterns reach the sampled pivots.
func FuzzQuantileSelect(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint16(32767), uint16(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8}, uint8(0), uint16(65535), uint16(0))
	f.Add(binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, math.Float64bits(math.NaN())), math.Float64bits(-1)), uint8(0), uint16(0), uint16(0))
	seq := make([]byte, 0, 8*300)
	for i := range 300 {
		seq = binary.LittleEndian.AppendUint64(seq, uint64(i*i%97))
	}
	f.Add(seq, uint8(0), uint16(32767), uint16(0))
	f.Add(seq, uint8(3), uint16(58981), uint16(0))
	f.Add(seq[:80], uint8(0), uint16(32767), uint16(9000))
	f.Add(seq[:800], uint8(50), uint16(64880), uint16(20000))
	f.Fuzz(func(t *testing.T, data []byte, mod uint8, level uint16, size uint16) {
		q := float64(level) / 65535
		words := len(data) / 8
		n := words
		if words > 0 {
			n = max(n, int(size))
		}
		x := make([]int64, n)
		fl := make([]float64, n)
		for i := range x {
			w := binary.LittleEndian.Uint64(data[8*(i%words):]) + uint64(i/words)
			fl[i] = math.Float64frombits(w)
			if mod > 0 {
				w %= uint64(mod)
				fl[i] = float64(w)
			}
			x[i] = int64(w)
		}
		checkQuantileInt(t, x, q)
		checkQuantileFloat(t, fl, q)
	})
}

// quantileBenchSizes are the list lengths of the quantile benchmarks.
var quantileBenchSizes = []int{1_000_000, 10_000_000}

// benchDurations returns n log-uniform durations between 1 s and 7 days
// in µs (int64) and the same in seconds (float64).
func benchDurations(n int) ([]int64, []float64) {
	r := rand.New(rand.NewPCG(3, uint64(n)))
	d := make([]int64, n)
	f := make([]float64, n)
	for i := range d {
		d[i] = logUniformMicros(r)
		f[i] = float64(d[i]) / 1e6
	}
	return d, f
}

// benchQuantile runs the median of a fresh copy of src (the copy is part
// of every iteration, as both ways reorder the list).
func benchQuantile[T int64 | float64](b *testing.B, src []T, median func([]T) float64) {
	work := make([]T, len(src))
	b.SetBytes(int64(len(src)) * 8)
	b.ReportAllocs()
	for b.Loop() {
		copy(work, src)
		if median(work) <= 0 {
			b.Fatal("non-positive median")
		}
	}
}

// BenchmarkQuantileSort is the reference way: sort, then Quantile.
func BenchmarkQuantileSort(b *testing.B) {
	for _, n := range quantileBenchSizes {
		d, f := benchDurations(n)
		b.Run("int64/n="+strconv.Itoa(n), func(b *testing.B) {
			benchQuantile(b, d, func(x []int64) float64 { slices.Sort(x); return analysis.Quantile(x, 0.5) })
		})
		b.Run("float64/n="+strconv.Itoa(n), func(b *testing.B) {
			benchQuantile(b, f, func(x []float64) float64 { slices.Sort(x); return analysis.QuantileFloat(x, 0.5) })
		})
	}
}

// BenchmarkQuantileSelect is BenchmarkQuantileSort by selection.
func BenchmarkQuantileSelect(b *testing.B) {
	for _, n := range quantileBenchSizes {
		d, f := benchDurations(n)
		b.Run("int64/n="+strconv.Itoa(n), func(b *testing.B) {
			benchQuantile(b, d, func(x []int64) float64 { return analysis.QuantileSelect(x, 0.5) })
		})
		b.Run("float64/n="+strconv.Itoa(n), func(b *testing.B) {
			benchQuantile(b, f, func(x []float64) float64 { return analysis.QuantileSelectFloat(x, 0.5) })
		})
	}
}
