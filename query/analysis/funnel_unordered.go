package analysis

import (
	"math/bits"
	"slices"
	"unsafe"

	"github.com/spurdb/spur/trail"
)

// maskCount counts the events of one multi-step mask in a window.
type maskCount struct {
	m uint64
	c int32
}

// unoOut is the best window so far of the user (steps view) or of one
// bucket of window starts (trends view).
type unoOut struct {
	b   int32
	out funnelOutcome // step = the window's number of steps
}

// unoWalker runs the unordered funnel of docs/analytics.md §11: a window [t, t+W]
// starts at every step event with t in [From, To) and its value is the
// number of distinct steps its events fill, one step per event (a
// maximum bipartite matching; with one step per event, the number of
// steps present); a window with an exclusion event after t counts n if
// all n steps were done before the first such event, else 0. The user's
// result is the largest value; its counted window the first (by t) with
// it, whose times are the first event of each step there, sorted.
//
// The walker finalises window t once an event after t + W (or the end of
// the trail) has been seen, in order of t: it keeps the step events from
// the oldest pending start on (those within W of the latest event), the
// window's counts (per step for one-step events, per mask for the rest)
// maintained as the window slides, and the exclusion times.
type unoWalker struct {
	env *walkEnv
	// The step events held, as columns: time, steps matched, index and
	// (when keys are captured) value.
	ts    []int64
	ms    []uint64
	ids   []int32
	keys  []Key
	ws    int // events [ws, we) are counted in the window
	we    int
	next  int // the next pending start
	cnt   [MaxFunnelSteps]int32
	u     uint64 // steps with cnt > 0
	multi []maskCount
	xs    []int64 // exclusion times, ascending
	xh    int
	full  bool // steps view: a window holds every step, no later one counts
	// most is the most steps a window of the user can hold: n, or for a
	// whole trail the steps its events match at all (steps view: a window
	// that many holds is the counted one, no later one counts)
	most int
	outs []unoOut
	done []funnelOutcome
	seen [MaxFunnelSteps]int64 // scratch: first time of each step
	// scratch of the matching
	multi2 []maskCount
	left   []uint64
}

func newUnoWalker(env *walkEnv) *unoWalker {
	w := &unoWalker{env: env}
	w.reset()
	return w
}

func (w *unoWalker) reset() {
	w.ts, w.ms, w.ids, w.keys = w.ts[:0], w.ms[:0], w.ids[:0], w.keys[:0]
	w.multi, w.xs, w.outs, w.done = w.multi[:0], w.xs[:0], w.outs[:0], w.done[:0]
	w.ws, w.we, w.next, w.xh, w.u, w.full = 0, 0, 0, 0, 0, false
	w.most = w.env.n // chunk narrows it for a whole trail
	w.cnt = [MaxFunnelSteps]int32{}
}

func (w *unoWalker) clone() *unoWalker {
	c := *w
	c.ts, c.ms, c.ids, c.keys = slices.Clone(w.ts), slices.Clone(w.ms), slices.Clone(w.ids), slices.Clone(w.keys)
	c.multi, c.xs, c.outs, c.done = slices.Clone(w.multi), slices.Clone(w.xs), slices.Clone(w.outs), slices.Clone(w.done)
	c.multi2, c.left = nil, nil
	return &c
}

func (w *unoWalker) bytes() int64 {
	return int64(unsafe.Sizeof(*w)) + int64(cap(w.ts))*20 + int64(cap(w.keys))*16 + int64(cap(w.multi))*16 +
		int64(cap(w.xs))*8 + int64(cap(w.outs))*int64(unsafe.Sizeof(unoOut{})) + int64(cap(w.done))*int64(unsafe.Sizeof(funnelOutcome{}))
}

func (w *unoWalker) chunk(tr *trail.Trail, masks []uint64, keys *trail.Column) {
	if w.full {
		return
	}
	times := tr.Times
	base := int32(tr.Offset)
	if tr.Offset == 0 && !tr.More {
		var u uint64
		for _, m := range masks[:len(times)] {
			u |= m
		}
		// Most users match few steps (of the 100M bench app's users
		// with a step event of funnel4_unordered, 54 % match one, 25 %
		// two): their first window with those decides (272 → 251 ms).
		w.most = min(w.most, bits.OnesCount64(u&w.env.stepMask))
	}
	for i := 0; i < len(times) && !w.full; {
		j := i + 1
		for j < len(times) && times[j] == times[i] {
			j++
		}
		w.group(times, masks, keys, i, j, base)
		i = j
	}
}

// group takes the tie group times[i:j].
func (w *unoWalker) group(times []int64, masks []uint64, keys *trail.Column, i, j int, base int32) {
	env := w.env
	spec := env.spec
	t := times[i]
	w.finalize(t, false)
	if t < spec.From || t-spec.To >= spec.Window {
		return // in no window: windows start in [From, To) and span W
	}
	var xs uint64
	step := false
	for e := i; e < j; e++ {
		m := masks[e]
		if s := m & env.stepMask; s != 0 {
			w.ts = append(w.ts, t)
			w.ms = append(w.ms, s)
			w.ids = append(w.ids, base+int32(e))
			if keys != nil {
				w.keys = append(w.keys, Key{Bits: keys.Bits[e], Set: keys.Set[e]})
			}
			step = true
		}
		xs |= m & env.exclMask
	}
	if xs != 0 && !step {
		w.xs = append(w.xs, t)
	}
}

// finalize evaluates the pending windows that end before t (all of them
// with all).
func (w *unoWalker) finalize(t int64, all bool) {
	spec := w.env.spec
	for w.next < len(w.ts) && !w.full {
		s := w.ts[w.next]
		if s >= spec.To || (!all && t-s <= spec.Window) {
			break
		}
		w.window(w.next)
		for w.next < len(w.ts) && w.ts[w.next] == s {
			w.next++
		}
	}
	// Events before the window start are no longer needed.
	if w.ws > 64 && w.ws > len(w.ts)/2 {
		n := copy(w.ts, w.ts[w.ws:])
		copy(w.ms, w.ms[w.ws:])
		copy(w.ids, w.ids[w.ws:])
		w.ts, w.ms, w.ids = w.ts[:n], w.ms[:n], w.ids[:n]
		if len(w.keys) > 0 {
			copy(w.keys, w.keys[w.ws:])
			w.keys = w.keys[:n]
		}
		w.we -= w.ws
		w.next -= w.ws
		w.ws = 0
	}
	if w.xh > 64 && w.xh > len(w.xs)/2 {
		n := copy(w.xs, w.xs[w.xh:])
		w.xs = w.xs[:n]
		w.xh = 0
	}
}

// window evaluates the window starting at event p.
func (w *unoWalker) window(p int) {
	env := w.env
	n := env.n
	s := w.ts[p]
	end := s + env.spec.Window
	for ; w.ws < p; w.ws++ {
		w.count(w.ms[w.ws], -1)
	}
	for ; w.we < len(w.ts) && w.ts[w.we] <= end; w.we++ {
		w.count(w.ms[w.we], 1)
	}
	for w.xh < len(w.xs) && w.xs[w.xh] <= s {
		w.xh++
	}
	var val int
	limit := w.we // events [p, limit) form the window's content
	if w.xh < len(w.xs) && w.xs[w.xh] <= end {
		x := w.xs[w.xh]
		for limit = p; limit < w.we && w.ts[limit] < x; limit++ {
		}
		if w.valueOf(w.ms[p:limit]) == n {
			val = n
		}
	} else {
		val = w.value()
	}
	var b int32
	if env.every {
		b = int32(env.bix.of(s))
	}
	o := w.out(b)
	if val <= int(o.out.step) {
		return
	}
	// A better window: its times are the first event of each step there.
	var present uint64
	for q := p; q < limit && present != env.stepMask; q++ {
		for m := w.ms[q] &^ present; m != 0; m &= m - 1 {
			w.seen[bits.TrailingZeros64(m)] = w.ts[q]
		}
		present |= w.ms[q]
	}
	ts := o.out.times[:0]
	for m := present; m != 0; m &= m - 1 {
		ts = append(ts, w.seen[bits.TrailingZeros64(m)])
	}
	slices.Sort(ts)
	o.out.step, o.out.first = int32(val), w.ids[p]
	w.full = val >= w.most && !env.every
	if len(w.keys) > 0 {
		o.out.key = w.keys[p]
	}
}

// out returns the best-window record of bucket b, reporting the earlier
// buckets (windows are evaluated in order of their start).
func (w *unoWalker) out(b int32) *unoOut {
	if k := len(w.outs); k > 0 && w.outs[k-1].b == b {
		return &w.outs[k-1]
	}
	if k := len(w.outs); k > 0 {
		w.emit(&w.outs[k-1])
		w.outs = w.outs[:0]
	}
	w.outs = append(w.outs, unoOut{b: b})
	o := &w.outs[0]
	o.out.bucket = b
	return o
}

func (w *unoWalker) emit(o *unoOut) {
	if o.out.step > 0 {
		w.done = append(w.done, o.out)
	}
}

// count adds (d = 1) or removes (d = -1) an event of steps m from the
// window.
func (w *unoWalker) count(m uint64, d int32) {
	if m&(m-1) == 0 {
		s := bits.TrailingZeros64(m)
		w.cnt[s] += d
		if w.cnt[s] > 0 {
			w.u |= m
		} else {
			w.u &^= m
		}
		return
	}
	for i := range w.multi {
		if w.multi[i].m == m {
			w.multi[i].c += d
			if w.multi[i].c == 0 {
				w.multi[i] = w.multi[len(w.multi)-1]
				w.multi = w.multi[:len(w.multi)-1]
			}
			return
		}
	}
	w.multi = append(w.multi, maskCount{m: m, c: d})
}

// value returns the window's number of steps from its counts.
func (w *unoWalker) value() int {
	if len(w.multi) == 0 {
		return bits.OnesCount64(w.u)
	}
	return matchSteps(w.u, w.multi, w.env.n, &w.left)
}

// finish evaluates the remaining windows and returns every outcome of the
// user, valid until reset.
func (w *unoWalker) finish() []funnelOutcome {
	w.finalize(0, true)
	if k := len(w.outs); k > 0 {
		w.emit(&w.outs[k-1])
		w.outs = w.outs[:0]
	}
	return w.done
}

// valueOf returns the number of steps events with the step masks ms
// fill, one step per event.
func (w *unoWalker) valueOf(ms []uint64) int {
	var u uint64
	multi := w.multi2[:0]
	for _, m := range ms {
		if m&(m-1) == 0 {
			u |= m
			continue
		}
		found := false
		for i := range multi {
			if multi[i].m == m {
				multi[i].c++
				found = true
				break
			}
		}
		if !found {
			multi = append(multi, maskCount{m: m, c: 1})
		}
	}
	w.multi2 = multi
	if len(multi) == 0 {
		return bits.OnesCount64(u)
	}
	return matchSteps(u, multi, w.env.n, &w.left)
}

// matchSteps returns the size of a maximum matching between events and
// steps, each event filling one of the steps it matches: single holds
// the steps that one-step events match (each such step is filled by one
// of them in some maximum matching), multi the other events by mask. The
// rest is Kuhn's augmenting paths over at most n steps.
func matchSteps(single uint64, multi []maskCount, n int, scratch *[]uint64) int {
	free := (uint64(1)<<uint(n) - 1) &^ single
	// One left node per event that can still matter: at most
	// popcount(mask ∩ free) copies of a mask.
	left := (*scratch)[:0]
	for _, mc := range multi {
		mm := mc.m & free
		for c := min(int(mc.c), bits.OnesCount64(mm)); c > 0; c-- {
			left = append(left, mm)
		}
	}
	*scratch = left
	var owner [MaxFunnelSteps]int32 // step → left node + 1
	matched := 0
	for l := range left {
		if matched == bits.OnesCount64(free) {
			break
		}
		var visited uint64
		if augment(l, left, &owner, &visited) {
			matched++
		}
	}
	return bits.OnesCount64(single) + matched
}

func augment(l int, left []uint64, owner *[MaxFunnelSteps]int32, visited *uint64) bool {
	for m := left[l] &^ *visited; m != 0; m &= m - 1 {
		s := bits.TrailingZeros64(m)
		if *visited&(1<<uint(s)) != 0 {
			continue
		}
		*visited |= 1 << uint(s)
		if owner[s] == 0 || augment(int(owner[s])-1, left, owner, visited) {
			owner[s] = int32(l + 1)
			return true
		}
	}
	return false
}
