package segment

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unsafe"
)

// filterInput is one user's rows for the row filters: deltas (the first
// from base), codes over 40 names and masks that select some of them.
type filterInput struct {
	deltas []uint64
	codes  []uint32
	masks  []uint64
	base   int64
	g      uint64
}

func randomFilterInput(r *rand.Rand, rows int, live int) filterInput {
	in := filterInput{
		deltas: make([]uint64, rows),
		codes:  make([]uint32, rows),
		masks:  make([]uint64, 40),
		base:   r.Int64N(1<<50) - 1<<49,
		g:      []uint64{1, 1000, 1e6}[r.IntN(3)],
	}
	for i := range rows {
		in.deltas[i] = uint64(r.IntN(1 << (1 + r.IntN(30))))
		if r.IntN(50) == 0 {
			in.deltas[i] = r.Uint64() // wraps: the filters must agree anyway
		}
		in.codes[i] = uint32(r.IntN(40))
	}
	for range live {
		in.masks[r.IntN(40)] = 1 << r.IntN(4)
	}
	return in
}

// liveCodes is FilterDeltasBlock's live8 for masks over at most 512
// codes.
func liveCodes(masks []uint64) *[8]uint64 {
	var live8 [8]uint64
	for c, m := range masks {
		if m != 0 {
			live8[c/64] |= 1 << (c % 64)
		}
	}
	return &live8
}

// packLows16 is deltas as Block.PackedDeltas gives them at width
// 16: low parts, and the rows whose delta does not fit with their high
// parts.
func packLows16(deltas []uint64) *BlockDeltas {
	bd := &BlockDeltas{lows: make([]byte, 2*len(deltas))}
	for r, d := range deltas {
		binary.LittleEndian.PutUint16(bd.lows[2*r:], uint16(d))
		if d>>16 != 0 {
			bd.excRows, bd.excHighs = append(bd.excRows, uint64(r)), append(bd.excHighs, d>>16)
		}
	}
	return bd
}

// packLows16Bits is packLows16 with the exceptions' rows as a bitmap
// (encTimesPFORBits), and a rank cache shared by the calls that use it.
func packLows16Bits(deltas []uint64) *BlockDeltas {
	bd := packLows16(deltas)
	bd.excBits = make([]byte, 8*((len(deltas)+63)/64))
	for _, r := range bd.excRows {
		bd.excBits[r/8] |= 1 << (r % 8)
	}
	bd.excRows, bd.excRank = nil, &RankCache{}
	return bd
}

// layouts returns the ways FilterDeltasBlock reads deltas: 64-bit, and
// 16-bit low parts with exceptions by rows and by bitmap.
func layouts(deltas []uint64) []*BlockDeltas {
	return []*BlockDeltas{{deltas: slices.Clone(deltas)}, packLows16(deltas), packLows16Bits(deltas)}
}

// endsFrom returns, for users' row ends over a whole block, the rows
// before user u0 and the ends of users u0… counted from there: what
// FilterDeltasBlock gives when a scan resumes at user u0.
func endsFrom(ends []int32, u0 int) (int32, []int32) {
	k0 := int32(0)
	if u0 > 0 {
		k0 = ends[u0-1]
	}
	we := slices.Clone(ends[u0:])
	for i := range we {
		we[i] -= k0
	}
	return k0, we
}

// naiveFilter is the row filter spelled out: the running time of every
// row, kept when its mask is non-zero and from ≤ t < from+span.
func naiveFilter(in filterInput, from int64, span uint64) (times []int64, masks []uint64) {
	t := in.base
	for i, d := range in.deltas {
		t += int64(d * in.g)
		if m := in.masks[in.codes[i]]; m != 0 && uint64(t)-uint64(from) < span {
			times, masks = append(times, t), append(masks, m)
		}
	}
	return times, masks
}

// filterCase is a random block of users for the row filters, with the
// answer of naiveFilter: want and wantM the passing rows' times and
// masks, wantEnds the end of each user's rows in them.
type filterCase struct {
	block    filterInput
	starts   []int32
	masks    []uint64
	base     int64
	g        uint64
	from     int64
	span     uint64
	want     []int64
	wantM    []uint64
	wantEnds []int32
	inRange  bool
}

// randomFilterCase returns the block of trial: dense and sparse masks,
// ranges that cut the users' times on odd trials, deltas that wrap, users
// with no match.
func randomFilterCase(r *rand.Rand, trial int) *filterCase {
	live := r.IntN(41)
	users := 1 + r.IntN(8)
	fc := &filterCase{starts: []int32{0}, from: math.MinInt64, span: math.MaxUint64, inRange: trial%2 == 0}
	fc.base = r.Int64N(1<<50) - 1<<49
	if !fc.inRange {
		fc.from, fc.span = fc.base+r.Int64N(1<<40), uint64(r.Int64N(1<<42))
	}
	fc.masks = randomFilterInput(r, 0, live).masks
	fc.g = []uint64{1, 1000, 1e6}[r.IntN(3)]
	for range users {
		in := randomFilterInput(r, 1+r.IntN(60), 0)
		in.masks, in.base, in.g = fc.masks, fc.base, fc.g
		tw, mw := naiveFilter(in, fc.from, fc.span)
		fc.want, fc.wantM = append(fc.want, tw...), append(fc.wantM, mw...)
		fc.wantEnds = append(fc.wantEnds, int32(len(fc.want)))
		fc.block.deltas = append(fc.block.deltas, in.deltas...)
		fc.block.codes = append(fc.block.codes, in.codes...)
		fc.starts = append(fc.starts, int32(len(fc.block.deltas)))
	}
	return fc
}

// check fails t unless out, outm and ends are fc's answer from user u0 on.
func (fc *filterCase) check(t *testing.T, trial int, name string, u0 int, out []int64, outm []uint64, ends []int32) {
	t.Helper()
	k0, we := endsFrom(fc.wantEnds, u0)
	k := we[len(we)-1]
	if int(k) > len(out) || int(k) > len(outm) {
		t.Fatalf("trial %d: %s from user %d: %d rows, want %d", trial, name, u0, min(len(out), len(outm)), k)
	}
	if len(ends) != len(we) || !slices.Equal(out[:k], fc.want[k0:]) || !slices.Equal(outm[:k], fc.wantM[k0:]) || !slices.Equal(ends, we) {
		t.Fatalf("trial %d: %s from user %d: got ends %v, rows %v %v; want ends %v, rows %v %v", trial, name, u0, ends, out[:min(int(k), len(out))], outm[:min(int(k), len(outm))], we, fc.want[k0:], fc.wantM[k0:])
	}
}

// TestFilterDeltasVariants compares FilterDeltas (whole range),
// FilterDeltasInRange (per user) and FilterDeltasSparse (per block of
// users, from its first user and from a later one) with naiveFilter on
// random blocks (randomFilterCase).
func TestFilterDeltasVariants(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 2000 {
		fc := randomFilterCase(r, trial)
		users, n := len(fc.starts)-1, len(fc.block.deltas)
		block, starts, masks, base, g := &fc.block, fc.starts, fc.masks, fc.base, fc.g
		perUser := func(f func(out []int64, outm []uint64, deltas []uint64, codes []uint32) int) ([]int64, []uint64, []int32) {
			out, outm, ends := make([]int64, n), make([]uint64, n), make([]int32, users)
			k := 0
			for u := range users {
				s, e := starts[u], starts[u+1]
				k += f(out[k:], outm[k:], block.deltas[s:e], block.codes[s:e])
				ends[u] = int32(k)
			}
			return out, outm, ends
		}
		o, om, e := perUser(func(out []int64, outm []uint64, deltas []uint64, codes []uint32) int {
			return FilterDeltasInRange(out, outm, deltas, codes, masks, base, g, fc.from, fc.span)
		})
		fc.check(t, trial, "in range", 0, o, om, e)
		if fc.inRange {
			o, om, e = perUser(func(out []int64, outm []uint64, deltas []uint64, codes []uint32) int {
				return FilterDeltas(out, outm, deltas, codes, masks, base, g)
			})
			fc.check(t, trial, "dense", 0, o, om, e)
		}
		out, outm, ends := make([]int64, n), make([]uint64, n), make([]int32, users)
		rows := make([]int32, n)
		k := FilterDeltasSparse(out, outm, rows, ends, &Block{Deltas: block.deltas}, block.codes, starts, masks, base, g, fc.from, fc.span)
		fc.check(t, trial, "sparse", 0, out, outm, ends)
		// rows: the block rows of the passing rows, in order, whose
		// naive times are the ones written.
		for i, r := range rows[:k] {
			u := sort.Search(users, func(u int) bool { return starts[u+1] > r })
			tr := base
			for j := starts[u]; j <= r; j++ {
				tr += int64(block.deltas[j] * g)
			}
			if tr != out[i] || masks[block.codes[r]] != outm[i] || (i > 0 && r <= rows[i-1]) {
				t.Fatalf("trial %d: passing row %d is block row %d (user %d, time %d, mask %d), wrote time %d, mask %d", trial, i, r, u, tr, masks[block.codes[r]], out[i], outm[i])
			}
		}
		// From a later user of the block on, as a scan resumes.
		if users > 1 {
			u0 := 1 + r.IntN(users-1)
			ends = ends[:users-u0]
			FilterDeltasSparse(out, outm, rows, ends, &Block{Deltas: block.deltas}, block.codes, starts[u0:], masks, base, g, fc.from, fc.span)
			fc.check(t, trial, "sparse", u0, out, outm, ends)
		}
	}
}

// TestFilterDeltasBlock compares FilterDeltasBlock with naiveFilter on the
// blocks of TestFilterDeltasVariants, from every user on (as a scan
// resumes within a block), over 64-bit deltas and 16-bit low parts with
// exceptions by rows and by bitmap, and over 40, 200 or 512 event names:
// each code c becomes one of c·scale … c·scale+scale-1, all with c's mask
// (codes ≥ 64 use the other live words).
func TestFilterDeltasBlock(t *testing.T) {
	if !useAVX512 {
		t.Skip("FilterDeltasBlock cannot run: " + missingAVX512)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for trial := range 2000 {
		fc := randomFilterCase(r, trial)
		users, n := len(fc.starts)-1, len(fc.block.deltas)
		scale := []int{1, 5, 12}[trial%3]
		bcodes, bmasks := make([]uint32, n), make([]uint64, 40*scale+[]int{0, 0, 32}[trial%3])
		for i, c := range fc.block.codes {
			bcodes[i] = c*uint32(scale) + uint32(r.IntN(scale))
		}
		for c := range 40 * scale {
			bmasks[c] = fc.masks[c/scale]
		}
		live8 := liveCodes(bmasks)
		lays := layouts(fc.block.deltas) // the bitmap's rank cache carries over users
		for u0 := range users {
			for _, bd := range lays {
				out, outm, ends := make([]int64, n+8), make([]uint64, n+8), make([]int32, users-u0)
				k := FilterDeltasBlock(out, outm, ends, bd, bcodes, fc.starts[u0:], bmasks, live8, fc.base, fc.g, fc.inRange, fc.from, fc.span, nil, &FilterScratch{})
				fc.check(t, trial, fmt.Sprintf("block (%d names, 16-bit lows %v)", len(bmasks), bd.lows != nil), u0, out[:k], outm[:k], ends)
				if bd.lows == nil && !slices.Equal(fc.block.deltas, bd.deltas) {
					t.Fatalf("trial %d: block from user %d changed the deltas", trial, u0)
				}
			}
		}
	}
}

// TestFilterArgsLayout checks filterArgs against the offsets at which
// filter_amd64.s reads its fields: every load from the argument pointer
// there names its field ("N(AX) ... // a.field"), and each must be at
// unsafe.Offsetof that field, 8 bytes wide, every field read once.
func TestFilterArgsLayout(t *testing.T) {
	src, err := os.ReadFile("filter_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	var a filterArgs
	fields := map[string]uintptr{
		"deltas": unsafe.Offsetof(a.deltas), "codes": unsafe.Offsetof(a.codes), "n": unsafe.Offsetof(a.n),
		"flags": unsafe.Offsetof(a.flags), "perm": unsafe.Offsetof(a.perm), "live": unsafe.Offsetof(a.live),
		"kcodes": unsafe.Offsetof(a.kcodes), "out": unsafe.Offsetof(a.out), "exc": unsafe.Offsetof(a.exc),
		"kstep": unsafe.Offsetof(a.kstep), "kbits": unsafe.Offsetof(a.kbits), "base": unsafe.Offsetof(a.base),
		"g": unsafe.Offsetof(a.g), "from": unsafe.Offsetof(a.from), "span": unsafe.Offsetof(a.span),
		"mode": unsafe.Offsetof(a.mode), "highs": unsafe.Offsetof(a.highs), "thin": unsafe.Offsetof(a.thin),
		"add": unsafe.Offsetof(a.add), "slot": unsafe.Offsetof(a.slot), "inv": unsafe.Offsetof(a.inv),
	}
	if got, want := reflect.TypeOf(a).NumField(), len(fields); got != want {
		t.Fatalf("filterArgs has %d fields, the test knows %d", got, want)
	}
	if unsafe.Sizeof(a) != uintptr(8*len(fields)) {
		t.Fatalf("filterArgs is %d bytes, want %d: 8 per field", unsafe.Sizeof(a), 8*len(fields))
	}
	load := regexp.MustCompile(`\b(\d+)\(AX\)`)
	named := regexp.MustCompile(`// a\.(\w+)$`)
	seen := map[string]bool{}
	for i, line := range strings.Split(string(src), "\n") {
		m := load.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		f := named.FindStringSubmatch(line)
		if f == nil {
			t.Fatalf("filter_amd64.s:%d: load %q names no field (// a.field)", i+1, strings.TrimSpace(line))
		}
		off, ok := fields[f[1]]
		if !ok {
			t.Fatalf("filter_amd64.s:%d: field %q is not a field of filterArgs", i+1, f[1])
		}
		if m[1] != fmt.Sprint(off) {
			t.Errorf("filter_amd64.s:%d: reads a.%s at offset %s, filterArgs has it at %d", i+1, f[1], m[1], off)
		}
		seen[f[1]] = true
	}
	for name := range fields {
		if !seen[name] {
			t.Errorf("filter_amd64.s never reads a.%s", name)
		}
	}
}

// BenchmarkFilterDeltas runs the row filters over a block of users of 24
// rows (the generator's mean) with 1 of 40 names live, about 2.5% of
// rows: the purchase event of
// bench/queries/trend_purchase_by_platform.json.
func BenchmarkFilterDeltas(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var block filterInput
	starts := []int32{0}
	for len(block.deltas) < 1<<16 {
		in := randomFilterInput(r, 24, 0)
		block.deltas = append(block.deltas, in.deltas...)
		block.codes = append(block.codes, in.codes...)
		starts = append(starts, int32(len(block.deltas)))
	}
	users, rows := len(starts)-1, len(block.deltas)
	masks := make([]uint64, 40)
	masks[7] = 1
	out, outm, ends, brows := make([]int64, rows), make([]uint64, rows), make([]int32, users), make([]int32, rows)
	from, span := int64(math.MinInt64), uint64(math.MaxUint64)
	b.Run("sparse", func(b *testing.B) {
		b.ReportAllocs()
		blk := &Block{Deltas: block.deltas}
		for b.Loop() {
			FilterDeltasSparse(out, outm, brows, ends, blk, block.codes, starts, masks, 1e12, 1000, from, span)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// dense: 4 of 40 names live (10% of rows), about the funnel of
	// bench/queries/funnel4.json (13%); per user as drain did, and per block.
	dmasks := make([]uint64, 40)
	for i, c := range []int{3, 11, 19, 27} {
		dmasks[c] = 1 << i
	}
	b.Run("dense/per-user", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			k := 0
			for u := range users {
				s, e := starts[u], starts[u+1]
				k += FilterDeltas(out[k:], outm[k:], block.deltas[s:e], block.codes[s:e], dmasks, 1e12, 1000)
				ends[u] = int32(k)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	live8 := liveCodes(dmasks)
	var fs FilterScratch
	bout, boutm := make([]int64, rows+8), make([]uint64, rows+8)
	// The block filter over 64-bit deltas, and over 16-bit low parts,
	// with 20% of the deltas above 16 bits (the generated data's time
	// deltas: 21%).
	lows := &BlockDeltas{deltas: make([]uint64, rows)}
	for i := range lows.deltas {
		lows.deltas[i] = uint64(r.IntN(1 << 14))
		if r.IntN(5) == 0 {
			lows.deltas[i] = 1<<16 + uint64(r.IntN(1<<30))
		}
	}
	for name, bd := range map[string]*BlockDeltas{"dense/block": lows, "dense/block-lows16": packLows16(lows.deltas), "dense/block-lows16-bits": packLows16Bits(lows.deltas)} {
		b.Run(name, func(b *testing.B) {
			if !useAVX512 {
				b.Skip("FilterDeltasBlock cannot run: " + missingAVX512)
			}
			b.ReportAllocs()
			for b.Loop() {
				FilterDeltasBlock(bout, boutm, ends, bd, block.codes, starts, dmasks, live8, 1e12, 1000, true, from, span, nil, &fs)
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	// Thinned to one row per user and day, every row live ($any, as in
	// bench/queries/retention_install_daily.json's returns and
	// distinct_users.json): the deltas above, ms apart.
	amasks := make([]uint64, 40)
	var th Thinning
	for c := range amasks {
		amasks[c] = 1
		th.Codes[c/64] |= 1 << (c % 64)
	}
	th.Slot = 86400e6
	alive8 := liveCodes(amasks)
	b.Run("thin/block-lows16", func(b *testing.B) {
		if !useAVX512 {
			b.Skip("FilterDeltasBlock cannot run: " + missingAVX512)
		}
		b.ReportAllocs()
		bd := packLows16(lows.deltas)
		for b.Loop() {
			FilterDeltasBlock(bout, boutm, ends, bd, block.codes, starts, amasks, alive8, 1e12, 1000, true, from, span, &th, &fs)
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("in-range", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for u := range users {
				s, e := starts[u], starts[u+1]
				FilterDeltasInRange(out, outm, block.deltas[s:e], block.codes[s:e], masks, 1e12, 1000, from, span)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// FuzzFilterDeltasBlock checks the vector filter against naiveFilter on
// blocks the fuzzer shapes: data gives, per row, a delta (2 bytes, a
// third one above 16 bits when its top bit is set), a code (over names
// event names) and whether the row starts a user; the range, the masks'
// live codes, the first user filtered and the thinning (against
// naiveThin) come from the seed values. Each block is filtered over
// 64-bit deltas and over 16-bit low parts.
func FuzzFilterDeltasBlock(f *testing.F) {
	f.Add([]byte("\x01\x00\x05\x80\x10\x00\x00\x01\x00\x00\xff\xff\x07\x02\x00\x03\x01\x01"), uint16(40), uint64(0x0f0f), int64(100), uint64(1<<20), uint8(0), true, int64(0))
	f.Add(bytes.Repeat([]byte{0x34, 0x92, 0x27, 0x05}, 300), uint16(512), uint64(1<<63|5), int64(-1), uint64(1<<40), uint8(3), false, int64(0))
	f.Add(bytes.Repeat([]byte{0x34, 0x02, 0x07, 0x04, 0x00, 0x01, 0x07, 0x00}, 200), uint16(9), uint64(77), int64(-1), uint64(1<<40), uint8(0), true, int64(86400e6))
	f.Add(bytes.Repeat([]byte{0x10, 0x00, 0x03, 0x00, 0xff, 0xff, 0x03, 0x80, 0x05}, 100), uint16(4), uint64(3), int64(1<<45), uint64(1<<44), uint8(1), false, int64(-3600e6))
	f.Fuzz(func(t *testing.T, data []byte, names uint16, liveSeed uint64, from int64, span uint64, first uint8, inRange bool, thinSlot int64) {
		if !useAVX512 {
			t.Skip("FilterDeltasBlock cannot run: " + missingAVX512)
		}
		names = 1 + names%512
		var deltas []uint64
		var codes []uint32
		starts := []int32{0}
		for len(data) >= 4 && len(deltas) < 5000 {
			d := uint64(binary.LittleEndian.Uint16(data))
			c := uint32(data[2]) % uint32(names)
			flag := data[3]
			data = data[4:]
			if flag&0x80 != 0 && len(data) > 0 {
				d |= uint64(data[0]) << (16 + flag&31)
				data = data[1:]
			}
			if flag&1 == 1 && len(deltas) > 0 {
				starts = append(starts, int32(len(deltas)))
			}
			deltas, codes = append(deltas, d), append(codes, c)
		}
		if len(deltas) == 0 {
			return
		}
		starts = append(starts, int32(len(deltas)))
		users := len(starts) - 1
		masks := make([]uint64, names)
		r := rand.New(rand.NewPCG(liveSeed, uint64(names)))
		for c := range masks {
			if r.IntN(4) == 0 {
				masks[c] = 1 + r.Uint64N(15)
			}
		}
		live8 := liveCodes(masks)
		base, g := int64(liveSeed>>1)-1<<40, []uint64{1, 1000, 1e6}[liveSeed%3]
		origin := from
		if inRange {
			from, span = math.MinInt64, math.MaxUint64
		}
		u0 := int(first) % users
		// With thinSlot ≠ 0, the rows with the mask of the first row's
		// code are thinned over slots of |thinSlot| from the seed from.
		var th *Thinning
		var thinMask uint64
		if thinSlot != 0 && thinSlot != math.MinInt64 && masks[codes[0]] != 0 {
			th = &Thinning{Origin: origin, Slot: max(thinSlot, -thinSlot)}
			thinMask = masks[codes[0]]
			for c, m := range masks {
				if m == thinMask {
					th.Codes[c/64] |= 1 << (c % 64)
				}
			}
		}
		var want []int64
		var wantM []uint64
		var wantEnds []int32
		for u := u0; u < users; u++ {
			s, e := starts[u], starts[u+1]
			in := filterInput{deltas: deltas[s:e], codes: codes[s:e], masks: masks, base: base, g: g}
			tw, mw := naiveFilter(in, from, span)
			if th != nil {
				tw, mw = naiveThin(in, from, span, inRange, thinMask, th.Origin, th.Slot)
			} else if inRange {
				// With inRange every time passes, but the full range
				// [-2^63, 2^63-1) naiveFilter gets excludes 2^63-1.
				t := base
				for i, d := range in.deltas {
					if t += int64(d * g); t == math.MaxInt64 && masks[in.codes[i]] != 0 {
						return
					}
				}
			}
			want, wantM = append(want, tw...), append(wantM, mw...)
			wantEnds = append(wantEnds, int32(len(want)))
		}
		n := len(deltas)
		for _, bd := range layouts(deltas) {
			out, outm, ends := make([]int64, n+8), make([]uint64, n+8), make([]int32, users-u0)
			k := FilterDeltasBlock(out, outm, ends, bd, codes, starts[u0:], masks, live8, base, g, inRange, from, span, th, &FilterScratch{})
			if k != len(want) || !slices.Equal(out[:k], want) || !slices.Equal(outm[:k], wantM) || !slices.Equal(ends, wantEnds) {
				t.Fatalf("16-bit lows %v, %d rows, %d users from %d: got %d rows, ends %v; want %d, ends %v", bd.lows != nil, n, users, u0, k, ends, len(want), wantEnds)
			}
		}
	})
}

// naiveThin is naiveFilter with ScanSpec.Thin applied: a passing row with
// mask thinMask, not the user's first, is dropped when the row before it
// passed with mask thinMask in the same slot ⌊x/slot⌋, x = t − origin.
// all means every time passes the range (filterDeltas). As in the
// kernel, when all and g divides slot, x is ⌊(t − origin)/g⌋ and the
// slot ⌊x/(slot/g)⌋, computed from the sum of the deltas (the same slot
// while times do not wrap); and a row is thinnable only while
// |x| < 2^51.
func naiveThin(in filterInput, from int64, span uint64, all bool, thinMask uint64, origin, slot int64) (times []int64, masks []uint64) {
	t := in.base
	var sum uint64
	u, c := int64(1), int64(0)
	d, ok := sub64(in.base, origin)
	fromSum := ok && all && slot%int64(in.g) == 0
	if fromSum {
		u, c = int64(in.g), floorDiv(d, int64(in.g))
	}
	prevThin, prevSlot := false, int64(0)
	for i, d := range in.deltas {
		t += int64(d * in.g)
		sum += d
		m := in.masks[in.codes[i]]
		pass := m != 0 && (all || uint64(t)-uint64(from) < span)
		x := t - origin
		if fromSum {
			x = int64(sum) + c
		}
		s := floorDiv(x, slot/u)
		thin := pass && m == thinMask && x > -1<<51 && x < 1<<51
		if pass && !(thin && i > 0 && prevThin && s == prevSlot) {
			times, masks = append(times, t), append(masks, m)
		}
		prevThin, prevSlot = thin, s
	}
	return times, masks
}

// TestFilterDeltasBlockThin checks filterDeltasBlock's thinning against
// naiveThin on random blocks whose users have runs of rows a few seconds
// to hours apart, over slots from 1 µs to a week, with and without a
// range, over 64-bit deltas and 16-bit low parts, from every user on.
func TestFilterDeltasBlockThin(t *testing.T) {
	if !useAVX512 {
		t.Skip("FilterDeltasBlock cannot run: " + missingAVX512)
	}
	r := rand.New(rand.NewPCG(7, 8))
	const thinMask = 2
	thinned := 0 // rows the naive filter thinned, over all trials
	defer func() {
		if thinned < 10000 {
			t.Errorf("only %d rows thinned: the test data lacks runs", thinned)
		}
	}()
	for trial := range 3000 {
		names := []int{40, 200, 512}[trial%3]
		masks := make([]uint64, names)
		for c := range masks {
			masks[c] = []uint64{0, thinMask, thinMask, thinMask | 1, 1, 4}[r.IntN(6)]
		}
		var th Thinning
		for c, m := range masks {
			if m == thinMask {
				th.Codes[c/64] |= 1 << (c % 64)
			}
		}
		g := []uint64{1, 1000, 1e6}[r.IntN(3)]
		all := trial%2 == 0
		// Slots of an hour, a day or a week, any length, or a multiple
		// of g (with every row in range, slots from the sums, in units
		// of g): short ones give slot numbers near 2^50, where the
		// quotient rounds.
		th.Slot = []int64{1 + r.Int64N(1000), 3600e6, 86400e6, 7 * 86400e6, 1 + r.Int64N(1<<40), int64(g) * (1 + r.Int64N(4096))}[r.IntN(6)]
		// u: the unit of the slot arithmetic (see naiveThin)
		u := int64(1)
		if all && th.Slot%int64(g) == 0 {
			u = int64(g)
		}
		base := r.Int64N(1<<50) - 1<<49
		th.Origin = base + r.Int64N(1<<38) - 1<<37
		switch trial % 6 {
		case 1:
			// x near 2^51 (in µs, ms or s), where the float64
			// quotient is inexact, or the row not thinned.
			th.Origin = base - (1<<50+r.Int64N(1<<51))*int64(1-2*r.IntN(2))*int64([]int{1, 1000, 1e6}[r.IntN(3)])
		case 3:
			th.Origin = base - (1<<61+r.Int64N(1<<61))*int64(1-2*r.IntN(2))
		}
		from, span := int64(math.MinInt64), uint64(math.MaxUint64)
		if !all {
			from, span = base+r.Int64N(1<<38), uint64(r.Int64N(1<<39))
		}
		users := 1 + r.IntN(8)
		var deltas []uint64
		var codes []uint32
		starts := []int32{0}
		var want []int64
		var wantM []uint64
		wantEnds := []int32{}
		for range users {
			rows := 1 + r.IntN(80)
			in := filterInput{deltas: make([]uint64, rows), codes: make([]uint32, rows), masks: masks, base: base, g: g}
			t := base
			for i := range rows {
				// Mostly seconds apart in g's units, sometimes hours,
				// rarely wrapping.
				in.deltas[i] = uint64(r.Int64N(int64(60e6/g) + 1))
				switch r.IntN(20) {
				case 0:
					in.deltas[i] = uint64(r.Int64N(int64(1e11/g) + 1))
				case 1:
					in.deltas[i] = r.Uint64()
				case 2, 3:
					// One unit before a slot boundary, then on it,
					// where the unit is g.
					if x := floorDiv(t-th.Origin, u); u == int64(g) && x > 0 {
						su := th.Slot / u
						in.deltas[i] = uint64((x/su+1)*su - 1 - x)
						if r.IntN(2) == 0 && i > 0 {
							in.deltas[i] = 1
						}
					}
				}
				if i == 0 {
					in.deltas[i] = uint64(r.Int64N(1<<38) / int64(g))
				}
				t += int64(in.deltas[i] * g)
				in.codes[i] = uint32(r.IntN(names))
				if i > 0 && r.IntN(3) == 0 {
					in.codes[i] = in.codes[i-1]
				}
			}
			tw, mw := naiveThin(in, from, span, all, thinMask, th.Origin, th.Slot)
			unthinned, _ := naiveThin(in, from, span, all, 0, th.Origin, th.Slot)
			thinned += len(unthinned) - len(tw)
			want, wantM = append(want, tw...), append(wantM, mw...)
			wantEnds = append(wantEnds, int32(len(want)))
			deltas, codes = append(deltas, in.deltas...), append(codes, in.codes...)
			starts = append(starts, int32(len(deltas)))
		}
		n := len(deltas)
		live8 := liveCodes(masks)
		lays := layouts(deltas) // the bitmap's rank cache carries over users
		for u0 := range users {
			k0, we := endsFrom(wantEnds, u0)
			for _, bd := range lays {
				out, outm, ends := make([]int64, n+8), make([]uint64, n+8), make([]int32, users-u0)
				k := FilterDeltasBlock(out, outm, ends, bd, codes, starts[u0:], masks, live8, base, g, all, from, span, &th, &FilterScratch{})
				if int32(k) != we[len(we)-1] || !slices.Equal(out[:k], want[k0:]) || !slices.Equal(outm[:k], wantM[k0:]) || !slices.Equal(ends, we) {
					t.Fatalf("trial %d: %d names, slot %d, range %v, 16-bit lows %v, from user %d: got ends %v, rows %v %v; want ends %v, rows %v %v", trial, names, th.Slot, !all, bd.lows != nil, u0, ends, out[:k], outm[:k], we, want[k0:], wantM[k0:])
				}
			}
		}
	}
}
