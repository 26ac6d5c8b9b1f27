package analysis

import (
	"math/bits"
	"slices"
	"unsafe"

	"github.com/spurdb/spur/trail"
)

// funnelOutcome is what a walker reports for one user (steps and
// time-to-convert views: one per user and breakdown row) or for one user
// and bucket (conversion over time).
type funnelOutcome struct {
	bucket int32 // trends view: bucket index; 0 otherwise
	step   int32 // the furthest step of the counted attempt (≥ 1)
	first  int32 // whole-trail index of the counted attempt's first event
	key    Key   // the value on that event, when the walker captures keys
	times  [MaxFunnelSteps]int64
}

// walkEnv is the per-query configuration the walkers share: the spec and
// what the accumulator's view and breakdown need from the walk.
type walkEnv struct {
	spec     *FunnelSpec
	n        int
	stepMask uint64 // bits of the steps
	exclMask uint64 // bits of the exclusions
	evMask   uint64 // bits of every event the walk considers
	span     uint64 // To - From
	every    bool   // trends view: every attempt advances
	bounds   []int64
	bix      bucketIndex
	needKeys bool // entry keys are reported: attempts with other keys are kept apart
}

// init sets env up in place (a Funnel holds its env by value: one
// allocation less per query, as before walkers shared one).
func (env *walkEnv) init(spec *FunnelSpec, every bool, bounds []int64, needKeys bool) {
	*env = walkEnv{spec: spec, n: spec.Steps, every: every, needKeys: needKeys,
		stepMask: uint64(1)<<uint(spec.Steps) - 1, span: uint64(spec.To - spec.From)}
	for _, x := range spec.Exclusions {
		env.exclMask |= 1 << uint(x.Bit)
	}
	env.evMask = env.stepMask | env.exclMask | spec.Events
	if every {
		env.bounds = bounds
		env.bix = newBucketIndex(bounds)
	}
}

// steps returns the steps event e of a group at time t matches (mask bit
// k-1 for step k; step 1 only inside [From, To)).
func (env *walkEnv) steps(m uint64, inRange bool) uint64 {
	s := m & env.stepMask
	if !inRange {
		s &^= 1
	}
	return s
}

// genAttempt is one attempt of the general walker (docs/analytics.md §5 rule 1): its
// entry time, furthest step, bucket (trends view), exclusion flag, the
// value on its step-1 event and its step times and events.
type genAttempt struct {
	t1    int64
	f     int32
	b     int32
	excl  bool
	key   Key
	times [MaxFunnelSteps]int64
	evs   [MaxFunnelSteps]int32
}

// genCand is an attempt that reached the furthest step of its outcome,
// as it was then.
type genCand struct {
	t1    int64
	first int32
	key   Key
	times [MaxFunnelSteps]int64
}

// genOutcome is the outcome of the user (steps view) or of one bucket
// (trends view): the furthest step m any attempt reached and, in the
// order they reached it, the attempts at m that are not excluded (docs/analytics.md
// §11: the counted attempt is the first of them; none left: the user is
// left out). Without exclusions only the first is kept.
type genOutcome struct {
	b int32
	m int32
	c []genCand
}

// genWalker runs the ordered funnel of docs/analytics.md §5 with the §11 variations:
// strict order (every event considered, attempts end), exclusions, and
// the conversion-over-time view (every attempt advances, outcomes per
// bucket of the step-1 time). It keeps an explicit set of live attempts,
// by furthest step (lv[f], in entry order), pruned without changing any
// answer:
//
//   - steps view, ordered: only the newest attempt with furthest step ≥ k
//     is ever chosen for step k+1 (§5 rule 2) and no attempt ends, so an
//     attempt older than one at the same or a higher level is dropped: at
//     most one attempt per level;
//   - steps view, strict: an attempt ends with the other attempts at its
//     level, so older attempts at a level matter once the newer ones have
//     moved on and ended; they are kept (in practice, when each event
//     matches one step, at most one attempt is alive), except at level 1
//     where the attempt a step-1 event opens supersedes them all;
//   - trends view without exclusions: of two attempts of one bucket at one
//     level, adjacent in entry order (and with one key, when keys are
//     reported), the newer reaches everything the older does, so the
//     older goes (at the end of each tie group);
//   - an attempt more than W after its entry can no longer advance; it
//     goes when met (its outcome is already recorded).
//
// State is bounded by the attempts opened within W that these rules
// keep, whatever the number of chunks.
type genWalker struct {
	env      *walkEnv
	pool     []genAttempt
	free     []int32
	lv       [MaxFunnelSteps + 1][]int32
	nonEmpty uint64 // bit f: lv[f] is not empty
	dirty    uint64 // bit f: lv[f] may hold attempts prune drops (trends view)
	lastOpen int64
	opened   bool
	outs     []genOutcome // steps view: outs[0]; trends view: buckets not yet final, ascending
	// trends view: the bucket of the last step-1 time looked up, [bLo, bHi)
	// (events come in time order: most lookups hit it)
	bLo, bHi int64
	bCur     int32
	done     []funnelOutcome
	moved    []int32
}

func newGenWalker(env *walkEnv) *genWalker {
	w := &genWalker{env: env}
	w.reset()
	return w
}

// reset prepares the walker for a new user.
func (w *genWalker) reset() {
	w.pool, w.free = w.pool[:0], w.free[:0]
	for f := 0; f <= w.env.n; f++ { // levels above n stay empty
		w.lv[f] = w.lv[f][:0]
	}
	w.nonEmpty, w.dirty, w.opened = 0, 0, false
	w.outs = w.outs[:0]
	if !w.env.every {
		w.outs = append(w.outs, genOutcome{c: w.outsCands()})
	}
	w.done = w.done[:0]
}

// outsCands returns a reusable empty candidate list.
func (w *genWalker) outsCands() []genCand {
	if cap(w.outs) > len(w.outs) {
		return w.outs[:len(w.outs)+1][len(w.outs)].c[:0]
	}
	return nil
}

// clone returns an independent copy of w (for breakdowns by the value of
// step k, which fork a walker at a value's first event).
func (w *genWalker) clone() *genWalker {
	c := &genWalker{env: w.env, pool: slices.Clone(w.pool), free: slices.Clone(w.free), nonEmpty: w.nonEmpty, dirty: w.dirty,
		lastOpen: w.lastOpen, opened: w.opened, done: slices.Clone(w.done)}
	for f := range w.lv {
		c.lv[f] = slices.Clone(w.lv[f])
	}
	c.outs = make([]genOutcome, len(w.outs))
	for i, o := range w.outs {
		c.outs[i] = genOutcome{b: o.b, m: o.m, c: slices.Clone(o.c)}
	}
	return c
}

// bytes returns the memory the walker holds.
func (w *genWalker) bytes() int64 {
	n := int64(cap(w.pool))*int64(unsafe.Sizeof(genAttempt{})) + int64(cap(w.free)+cap(w.moved))*4 +
		int64(cap(w.done))*int64(unsafe.Sizeof(funnelOutcome{}))
	for f := 0; f <= w.env.n; f++ {
		n += int64(cap(w.lv[f])) * 4
	}
	for _, o := range w.outs[:cap(w.outs)] {
		n += int64(unsafe.Sizeof(o)) + int64(cap(o.c))*int64(unsafe.Sizeof(genCand{}))
	}
	return n
}

// chunk runs the walk over one chunk with its own masks.
func (w *genWalker) chunk(tr *trail.Trail, masks []uint64, keys *trail.Column) {
	times := tr.Times
	masks = masks[:len(times)]
	base := int32(tr.Offset)
	for i := 0; i < len(times); {
		if w.nonEmpty == 0 && w.idle(times[i]) {
			// No attempt is alive: nothing happens before the next
			// step-1 event in the range (at its tie group's start).
			i = w.nextEntry(times, masks, i)
			if i == len(times) {
				break
			}
		}
		t := times[i]
		if i+1 < len(times) && times[i+1] == t {
			j := i + 2
			for j < len(times) && times[j] == t {
				j++
			}
			w.group(times, masks, keys, i, j, base)
			i = j
			continue
		}
		i = w.lone(times, masks, keys, i, base)
	}
}

// idle reports whether, with no attempt alive, events other than step 1
// change nothing at or after t: true unless an outcome holds a candidate
// that a later exclusion may still exclude.
func (w *genWalker) idle(t int64) bool {
	if w.env.exclMask == 0 {
		return true
	}
	for i := range w.outs {
		if c := w.outs[i].c; len(c) > 0 && t-c[0].t1 <= w.env.spec.Window {
			return false
		}
	}
	return true
}

// nextEntry returns the start of the tie group of the first event at or
// after i that matches step 1 inside [From, To), or len(times).
func (w *genWalker) nextEntry(times []int64, masks []uint64, i int) int {
	spec := w.env.spec
	span := w.env.span
	j := i
	for j < len(times) && (masks[j]&1 == 0 || uint64(times[j]-spec.From) >= span) {
		j++
	}
	for j > i && j < len(times) && times[j-1] == times[j] {
		j--
	}
	return j
}

// lone processes the lone event i (no other event at its time: group()
// without the tie rules) and the run of lone events after it that match
// the same steps and exclusions, and returns the index after the run. In
// such a run only the first event changes anything — a later one finds
// the same attempts and fails or finds them already moved; a later
// exclusion excludes no more; in strict order nothing is left to end —
// except for step 1, whose last event opens the attempt that replaces the
// others (the trends view stops the run at a bucket's end, and keeps
// every opening when keys are reported).
func (w *genWalker) lone(times []int64, masks []uint64, keys *trail.Column, i int, base int32) int {
	env := w.env
	spec := env.spec
	t := times[i]
	m := masks[i] & env.evMask
	if m == 0 {
		return i + 1
	}
	if env.every {
		w.expire(t)
	}
	inRange := uint64(t-spec.From) < env.span
	s := env.steps(m, inRange)
	if !inRange {
		m &^= 1
	}
	j := i + 1
	if s&(s-1) != 0 {
		w.event(t, s, m&env.exclMask, base+int32(i), i, keys)
		return j // several steps: no run
	}
	end := int64(1<<63 - 1)
	if s == 1 && env.every {
		if env.needKeys {
			w.event(t, s, m&env.exclMask, base+int32(i), i, keys)
			return j
		}
		w.bucketOf(t)
		end = w.bHi
	}
	for j < len(times) && (j+1 == len(times) || times[j+1] != times[j]) && times[j] < end {
		mj := masks[j] & env.evMask
		if uint64(times[j]-spec.From) >= env.span {
			mj &^= 1
		}
		if mj != m {
			break
		}
		j++
	}
	// In a run of step-1 events of the steps view, the first opens an
	// attempt the last one replaces: it matters only if it is the first
	// attempt to reach step 1 (or may have to stand in for an excluded
	// one, or strict order keeps older attempts).
	if s != 1 || j-1 == i || env.every || w.outs[0].m == 0 || len(w.outs[0].c) == 0 {
		w.event(t, s, m&env.exclMask, base+int32(i), i, keys)
	}
	if s == 1 && j-1 > i {
		last := j - 1
		if env.every {
			w.expire(times[last])
		}
		w.event(times[last], s, 0, base+int32(last), last, keys)
	}
	return j
}

// event processes one event at time t matching steps s and exclusions xs.
func (w *genWalker) event(t int64, s, xs uint64, id int32, e int, keys *trail.Column) {
	if s == 0 {
		if xs != 0 {
			w.exclude(t, xs)
		}
	} else {
		for r := s; r != 0; {
			b := 63 - bits.LeadingZeros64(r)
			r &^= 1 << uint(b)
			w.step(b+1, id, e, t, false, keys)
		}
	}
	if w.env.spec.Order == OrderStrict && w.nonEmpty&^(s<<1) != 0 {
		w.kill(s)
	}
	if w.dirty != 0 {
		w.prune(t)
	}
}

// group processes the tie group times[i:j] (masks[i:j]); base+e is event
// e's index. keys, if not nil, holds the values to capture on step-1
// events.
func (w *genWalker) group(times []int64, masks []uint64, keys *trail.Column, i, j int, base int32) {
	env := w.env
	spec := env.spec
	t := times[i]
	if env.every {
		w.expire(t)
	}
	inRange := uint64(t-spec.From) < env.span
	var first, firstStep, union, xs uint64
	rel := 0
	sameAll, sameSteps := true, true
	for e := i; e < j; e++ {
		m := masks[e]
		if m&env.evMask == 0 {
			continue
		}
		s := env.steps(m, inRange)
		if rel == 0 {
			first = s
		} else if s != first {
			sameAll = false
		}
		rel++
		if s != 0 {
			if union == 0 {
				firstStep = s
			} else if s != firstStep {
				sameSteps = false
			}
			union |= s
		}
		xs |= m & env.exclMask
	}
	if rel == 0 {
		return
	}
	strict := spec.Order == OrderStrict
	if union == 0 {
		// No step event at t: exclusions apply (docs/analytics.md §11: one at the time of a
		// step event is ignored), and in strict order every attempt ends.
		if xs != 0 {
			w.exclude(t, xs)
		}
		if strict {
			w.kill(0)
		}
		return
	}
	same := sameSteps
	if strict {
		same = sameAll
	}
	if same {
		for e := i; e < j; e++ {
			m := masks[e]
			if m&env.evMask == 0 {
				continue
			}
			s := env.steps(m, inRange)
			for r := s; r != 0; {
				b := 63 - bits.LeadingZeros64(r)
				r &^= 1 << uint(b)
				w.step(b+1, base+int32(e), e, t, false, keys)
			}
			if strict {
				w.kill(s)
			}
		}
	} else {
		for u := union; u != 0; u &= u - 1 {
			b := bits.TrailingZeros64(u)
			for e := i; e < j; e++ {
				if masks[e]&(1<<uint(b)) != 0 {
					w.step(b+1, base+int32(e), e, t, true, keys)
				}
			}
		}
	}
	if w.dirty != 0 {
		w.prune(t)
	}
}

// step processes event id (local index e) at time t for step k; mixed
// enables the "event already part of the attempt" test.
func (w *genWalker) step(k int, id int32, e int, t int64, mixed bool, keys *trail.Column) {
	env := w.env
	win := env.spec.Window
	if k == 1 {
		if w.opened && w.lastOpen == t {
			return
		}
		w.opened, w.lastOpen = true, t
		a := w.alloc()
		at := &w.pool[a]
		at.t1, at.f, at.excl, at.b = t, 1, false, 0
		if env.every {
			at.b = w.bucketOf(t)
		}
		at.key = Key{}
		if keys != nil {
			at.key = Key{Bits: keys.Bits[e], Set: keys.Set[e]}
		}
		at.times[0], at.evs[0] = t, id
		if env.every {
			if len(w.lv[1]) > 0 && env.exclMask == 0 {
				w.dirty |= 2
			}
			w.lv[1] = append(w.lv[1], a)
			w.nonEmpty |= 2
		} else {
			w.releaseLevel(1)
			w.lv[1] = append(w.lv[1], a)
			w.nonEmpty |= 2
		}
		w.reached(a, 1, t)
		return
	}
	if env.every {
		src := w.lv[k-1]
		movers := w.moved[:0]
		kept := 0
		for _, a := range src {
			at := &w.pool[a]
			switch {
			case t-at.t1 > win:
				w.release(a)
			case at.excl || (mixed && slices.Contains(at.evs[:at.f], id)):
				src[kept] = a
				kept++
			default:
				at.f = int32(k)
				at.times[k-1], at.evs[k-1] = t, id
				movers = append(movers, a)
				w.reached(a, k, t)
			}
		}
		w.setLevel(k-1, src[:kept])
		if len(movers) > 0 {
			if len(movers)+len(w.lv[k]) > 1 && env.exclMask == 0 {
				w.dirty |= 1 << uint(k)
			}
			w.setLevel(k, w.mergeByEntry(w.lv[k], movers))
		}
		w.moved = movers
		return
	}
	a, ok := w.chosen(k - 1)
	if !ok {
		return
	}
	at := &w.pool[a]
	if int(at.f) >= k || t-at.t1 > win || at.excl || (mixed && slices.Contains(at.evs[:at.f], id)) {
		return
	}
	// at is the newest attempt at level k-1: the top of lv[k-1].
	w.setLevel(k-1, w.lv[k-1][:len(w.lv[k-1])-1])
	at.f = int32(k)
	at.times[k-1], at.evs[k-1] = t, id
	if env.spec.Order == OrderStrict {
		// Keep the older attempts at level k (they end with a) unless
		// they can no longer advance.
		lst := w.lv[k]
		d := 0
		for d < len(lst) && t-w.pool[lst[d]].t1 > win {
			w.release(lst[d])
			d++
		}
		w.lv[k] = append(lst[:0], lst[d:]...)
	} else {
		// Every attempt older than a at a level ≤ k is never chosen again.
		for f := 1; f <= k; f++ {
			lst := w.lv[f]
			d := 0
			for d < len(lst) && w.pool[lst[d]].t1 < at.t1 {
				w.release(lst[d])
				d++
			}
			w.setLevel(f, append(lst[:0], lst[d:]...))
		}
	}
	w.lv[k] = append(w.lv[k], a)
	w.nonEmpty |= 1 << uint(k)
	w.reached(a, k, t)
}

// chosen returns the attempt with the latest entry among the live
// attempts that reached step lvl (docs/analytics.md §5 rule 2).
func (w *genWalker) chosen(lvl int) (int32, bool) {
	best := int32(-1)
	var bt int64
	for m := w.nonEmpty >> uint(lvl); m != 0; m &= m - 1 {
		f := lvl + bits.TrailingZeros64(m)
		lst := w.lv[f]
		top := lst[len(lst)-1]
		if best < 0 || w.pool[top].t1 > bt {
			best, bt = top, w.pool[top].t1
		}
	}
	return best, best >= 0
}

// reached records that attempt a reached step k at time t.
func (w *genWalker) reached(a int32, k int, t int64) {
	at := &w.pool[a]
	o := w.outcome(at.b)
	switch {
	case int32(k) > o.m:
		o.m = int32(k)
		o.c = o.c[:0]
		o.add(at, k)
	case int32(k) == o.m && w.env.exclMask != 0 && (len(o.c) == 0 ||
		(w.env.spec.Order == OrderStrict && t-o.c[0].t1 <= w.env.spec.Window)):
		// Kept in case the earlier ones are excluded; useless once the
		// first can no longer be. Outside strict order attempts reach a
		// step in entry order, so an exclusion that removes the first
		// removes every later one reached before it: one is enough.
		o.add(at, k)
	}
}

// add appends attempt at, which just reached step k, to the candidates.
// Only times[:k] are copied (the rest are never read): copying the whole
// 32-step array was 7 % of a 100M-event funnel-trends query.
func (o *genOutcome) add(at *genAttempt, k int) {
	o.c = slices.Grow(o.c, 1)
	o.c = o.c[:len(o.c)+1]
	c := &o.c[len(o.c)-1]
	c.t1, c.first, c.key = at.t1, at.evs[0], at.key
	copy(c.times[:k], at.times[:k])
}

// bucketOf returns the bucket of step-1 time t (trends view), from the
// last one looked up when t is in it.
func (w *genWalker) bucketOf(t int64) int32 {
	if t < w.bLo || t >= w.bHi {
		b := w.env.bix.of(t)
		w.bCur, w.bLo, w.bHi = int32(b), w.env.bounds[b], w.env.bounds[b+1]
	}
	return w.bCur
}

// outcome returns the outcome attempts of bucket b feed.
func (w *genWalker) outcome(b int32) *genOutcome {
	if !w.env.every {
		return &w.outs[0]
	}
	for i := len(w.outs) - 1; i >= 0 && w.outs[i].b >= b; i-- {
		if w.outs[i].b == b {
			return &w.outs[i]
		}
	}
	// Attempts open in time order: a new bucket comes last.
	w.outs = append(w.outs, genOutcome{b: b, c: w.outsCands()})
	return &w.outs[len(w.outs)-1]
}

// exclude applies the exclusions with bits in xs at time t (docs/analytics.md §11):
// attempts whose furthest step j is in [From, To) and that entered at
// most W before t are excluded, and leave the outcomes.
func (w *genWalker) exclude(t int64, xs uint64) {
	win := w.env.spec.Window
	for _, x := range w.env.spec.Exclusions {
		if xs&(1<<uint(x.Bit)) == 0 {
			continue
		}
		for f := x.From; f < x.To; f++ {
			lst := w.lv[f]
			kept := 0
			for _, a := range lst {
				at := &w.pool[a]
				if !at.excl && t-at.t1 <= win {
					at.excl = true
					if w.env.every { // it can no longer advance nor count
						w.release(a)
						continue
					}
				}
				lst[kept] = a
				kept++
			}
			w.setLevel(f, lst[:kept])
		}
		for oi := range w.outs {
			o := &w.outs[oi]
			if int(o.m) >= x.From && int(o.m) < x.To {
				kept := o.c[:0]
				for _, c := range o.c {
					if t-c.t1 > win {
						kept = append(kept, c)
					}
				}
				o.c = kept
			}
		}
	}
}

// kill ends, after an event matching steps s (strict order), the
// attempts whose furthest step it does not match.
func (w *genWalker) kill(s uint64) {
	for m := w.nonEmpty &^ (s << 1); m != 0; m &= m - 1 {
		w.releaseLevel(bits.TrailingZeros64(m))
	}
}

// prune drops, in the trends view without exclusions, at the levels that
// received attempts, attempts that can no longer advance and attempts
// dominated by the next newer attempt of their bucket at their level (see
// genWalker).
func (w *genWalker) prune(t int64) {
	win := w.env.spec.Window
	m := w.dirty & w.nonEmpty
	w.dirty = 0
	for ; m != 0; m &= m - 1 {
		f := bits.TrailingZeros64(m)
		lst := w.lv[f]
		kept := 0
		for x, a := range lst {
			at := &w.pool[a]
			if t-at.t1 > win {
				w.release(a)
				continue
			}
			if x+1 < len(lst) {
				nx := &w.pool[lst[x+1]]
				if nx.b == at.b && (!w.env.needKeys || nx.key == at.key) {
					w.release(a)
					continue
				}
			}
			lst[kept] = a
			kept++
		}
		w.setLevel(f, lst[:kept])
	}
}

// expire reports (trends view) the buckets none of whose attempts can
// change at or after time t: all entered more than W before t.
func (w *genWalker) expire(t int64) {
	env := w.env
	d := 0
	for d < len(w.outs) && t-(env.bounds[w.outs[d].b+1]-1) > env.spec.Window {
		w.emit(&w.outs[d])
		d++
	}
	if d > 0 {
		// Rotate the reported outcomes to the end, so that their
		// candidate lists are reused, never shared.
		for i := 0; i+d < len(w.outs); i++ {
			w.outs[i], w.outs[i+d] = w.outs[i+d], w.outs[i]
		}
		w.outs = w.outs[:len(w.outs)-d]
	}
}

// emit reports an outcome: the counted attempt, unless every attempt that
// reached its furthest step was excluded (the user is then left out).
func (w *genWalker) emit(o *genOutcome) {
	if o.m == 0 || len(o.c) == 0 {
		return
	}
	c := &o.c[0]
	w.done = slices.Grow(w.done, 1)
	w.done = w.done[:len(w.done)+1]
	d := &w.done[len(w.done)-1]
	d.bucket, d.step, d.first, d.key = o.b, o.m, c.first, c.key
	copy(d.times[:o.m], c.times[:o.m]) // the rest are never read
}

// finish reports the outcomes not yet reported and returns every
// outcome of the user, valid until reset.
func (w *genWalker) finish() []funnelOutcome {
	for i := range w.outs {
		w.emit(&w.outs[i])
	}
	w.outs = w.outs[:0]
	return w.done
}

func (w *genWalker) alloc() int32 {
	if n := len(w.free); n > 0 {
		a := w.free[n-1]
		w.free = w.free[:n-1]
		return a
	}
	w.pool = append(w.pool, genAttempt{})
	return int32(len(w.pool) - 1)
}

func (w *genWalker) release(a int32) { w.free = append(w.free, a) }

// releaseLevel ends every attempt at level f.
func (w *genWalker) releaseLevel(f int) {
	for _, a := range w.lv[f] {
		w.release(a)
	}
	w.setLevel(f, w.lv[f][:0])
}

// setLevel replaces lv[f] and keeps nonEmpty in step.
func (w *genWalker) setLevel(f int, lst []int32) {
	w.lv[f] = lst
	if len(lst) == 0 {
		w.nonEmpty &^= 1 << uint(f)
	} else {
		w.nonEmpty |= 1 << uint(f)
	}
}

// mergeByEntry merges movers (in entry order) into dst (in entry order).
func (w *genWalker) mergeByEntry(dst, movers []int32) []int32 {
	if len(dst) == 0 || w.pool[dst[len(dst)-1]].t1 < w.pool[movers[0]].t1 {
		return append(dst, movers...)
	}
	n := len(dst)
	dst = append(dst, movers...)
	slices.SortStableFunc(dst[:n+len(movers)], func(a, b int32) int {
		x, y := w.pool[a].t1, w.pool[b].t1
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return dst
}
