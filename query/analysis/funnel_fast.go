package analysis

import (
	"math/bits"
	"slices"

	"github.com/spurdb/spur/trail"
)

// FunnelPath is one user's funnel outcome.
type FunnelPath struct {
	// Step is the furthest step any attempt reached, 0 when no step-1
	// event lies in [From, To) or when every attempt that reached it was
	// excluded (docs/analytics.md §11: the user is left out).
	Step int
	// Times[k-1] (UTC µs) is when the counted attempt reached step k, for
	// k = 1..Step. The counted attempt is the first attempt to reach Step
	// (with exclusions: the first not excluded).
	Times [MaxFunnelSteps]int64
	// Events[k-1] is the index, in the user's whole trail (a chunk's
	// Offset plus the index in the chunk), of the event that filled step k
	// of the counted attempt (for breakdowns by the step-1 event's
	// property and for per-user lists).
	Events [MaxFunnelSteps]int32
}

// FunnelScratch is the per-user working state of FunnelUser: a fixed-size
// record (about 13 KiB) reused across users so that no per-event or
// per-user allocation happens, and carried between the chunks of one
// user's trail (its size does not depend on the trail). The zero value is
// ready; one goroutine at a time.
//
// Level k holds the attempt with the latest entry time among the attempts
// that have reached step k (PostHog's entered_timestamp[k]): its step
// times (the first is its entry time t1) and the whole-trail indices of
// its step events.
type FunnelScratch struct {
	have uint64 // bit k set: level k holds an attempt
	excl uint64 // bit k set: the attempt at level k is excluded (docs/analytics.md §11)
	// valid: the counted attempt (path) is not excluded; with exclusions,
	// a later attempt reaching path.Step replaces one that is
	valid bool
	// base is the whole-trail index of the current chunk's first event:
	// event indices are kept relative to it while a user's chunks are
	// walked (so the loops add nothing), rebased when a chunk starts and
	// made whole-trail indices on the last one.
	base int32
	// times[k][j] is when the level-k attempt reached step j+1;
	// times[k][0] is its entry time t1.
	times [MaxFunnelSteps + 1][MaxFunnelSteps]int64
	evs   [MaxFunnelSteps + 1][MaxFunnelSteps]int32
	path  FunnelPath
}

// FunnelUser runs the ordered-funnel algorithm of docs/analytics.md §5 (PostHog's
// funnel UDF, funnel-udf/src/steps.rs) with §11's exclusions over one
// chunk of a user's trail (package trail: a chunk with Offset 0 starts a
// user, the state carries over in st to the next chunk while More is set)
// and returns the user's outcome on the last chunk, nil on the others.
// The spec's steps, window, range and exclusions are used (the plain
// order: strict and unordered funnels are the Funnel accumulator's).
// spec must be valid (see FunnelSpec.Validate). The returned path points
// into st and is valid until the next call with st. No allocation.
//
// The trail's events are taken in groups of equal timestamp. An event
// "matches" step 1 only when its time is in [From, To). A group whose
// matching events all match the same set of steps is processed event by
// event in arrival order, each event's steps from highest to lowest; any
// other group as (event, step) pairs in ascending step, then arrival,
// order, where an event already part of the chosen attempt is skipped.
// For step 1 an attempt opens unless one already entered at this
// timestamp; for step k ≥ 2 the attempt at level k-1 advances if
// t - t1 ≤ Window and level k does not already hold an attempt with the
// same entry time. Processing stops once step n is reached (the rest of
// the trail, later chunks included, changes nothing: exclusions end
// before step n).
//
// Exclusions (§11) as the general walker applies them: an event matching
// no step at its time (a tie group with no step event) and exclusion x
// marks the attempts whose furthest step j is in [x.From, x.To) and that
// entered at most W before it; a marked attempt advances no further, and
// if the counted attempt was one (j = Step), the next attempt to reach
// Step is counted instead. An attempt's furthest step is the highest
// level holding its entry time (one attempt per entry time).
func FunnelUser(tr *trail.Trail, spec *FunnelSpec, st *FunnelScratch) *FunnelPath {
	n := spec.Steps
	if tr.Offset == 0 {
		st.have, st.excl, st.valid, st.path.Step, st.base = 0, 0, false, 0, 0
	} else if d := int32(tr.Offset) - st.base; d != 0 {
		st.rebase(d)
	}
	if st.path.Step < n {
		stepMask := uint64(1)<<uint(n) - 1
		var xmask uint64
		for _, x := range spec.Exclusions {
			xmask |= 1 << uint(x.Bit)
		}
		from := spec.From
		span := uint64(spec.To - spec.From)
		times := tr.Times
		masks := tr.Mask[:len(times)]
		for i := 0; i < len(times) && st.path.Step < n; {
			i = st.lone(times, masks, i, stepMask, xmask, spec)
			if i < len(times) && st.path.Step < n {
				i = st.group(times, masks, i, stepMask, xmask, uint64(times[i]-from) < span, spec)
			}
		}
	}
	if tr.More {
		return nil
	}
	if !st.valid {
		st.path.Step = 0 // every attempt that reached it was excluded
	}
	if st.base != 0 {
		for j := range st.path.Step {
			st.path.Events[j] += st.base
		}
		st.base = 0
	}
	return &st.path
}

// rebase moves the held event indices to a chunk starting d events after
// the previous one.
func (st *FunnelScratch) rebase(d int32) {
	for j := range st.path.Step {
		st.path.Events[j] -= d
	}
	for h := st.have; h != 0; h &= h - 1 {
		k := bits.TrailingZeros64(h)
		for j := range k {
			st.evs[k][j] -= d
		}
	}
	st.base += d
}

// lone processes events from index i up to the first tie group (or the
// end, or step n reached) and returns the index where it stopped. It is
// step() inlined by hand for lone events, kept free of calls so that the
// level bits and the result step stay in registers. A lone event's
// timestamp is unique in the trail (a chunk never splits a tie group), so
// no attempt entered at t exists yet (step 1 always opens) and the event
// is part of no attempt (no "already used" test).
//
// Runs of consecutive lone events with the same single step are
// collapsed: for step 1 only the run's last event matters (each opens an
// attempt that replaces the previous one at level 1; the first one may
// set the result), for a step k ≥ 2 only the first (the rest find the
// same level k-1 attempt and either fail the same way or find it already
// at step k).
//
// An exclusion event (one matching no step) is handed to exclude; a
// step event that matches an exclusion too is a step event only (docs/analytics.md §11:
// an exclusion at the time of a step event is ignored).
func (st *FunnelScratch) lone(times []int64, masks []uint64, i int, stepMask, xmask uint64, spec *FunnelSpec) int {
	masks = masks[:len(times)]
	from, span, w, n := spec.From, uint64(spec.To-spec.From), spec.Window, spec.Steps
	have, best := st.have, st.path.Step
	for ; i < len(times); i++ {
		t := times[i]
		if i+1 < len(times) && times[i+1] == t {
			break
		}
		m := masks[i] & stepMask
		if uint64(t-from) >= span {
			m &^= 1
		}
		if m == 0 {
			if xs := masks[i] & xmask; xs != 0 {
				st.have, st.path.Step = have, best
				st.exclude(t, xs, spec)
			}
			continue
		}
		if m == 1 {
			if best == 0 || best == 1 && !st.valid {
				best = 1
				st.valid = true
				st.path.Times[0] = t
				st.path.Events[0] = int32(i)
			}
			// Skip to the last lone in-range step-1 event of the run.
			for i+1 < len(times) && masks[i+1]&stepMask == 1 && uint64(times[i+1]-from) < span &&
				(i+2 == len(times) || times[i+2] != times[i+1]) {
				i++
			}
			have |= 2
			st.excl &^= 2
			st.times[1][0] = times[i]
			st.evs[1][0] = int32(i)
			continue
		}
		// last is the final event of this event's run: itself, or for a
		// single step k ≥ 2 the following lone events of the same step.
		last := i
		if m&(m-1) == 0 {
			for last+1 < len(times) && masks[last+1]&stepMask == m &&
				(last+2 == len(times) || times[last+2] != times[last+1]) {
				last++
			}
		}
		for m != 0 {
			b := 63 - bits.LeadingZeros64(m) // step k = b+1, from level b
			m &^= 1 << uint(b)
			cur := &st.times[b+1]
			curEv := &st.evs[b+1]
			if b == 0 {
				have |= 2
				st.excl &^= 2
				cur[0] = t
				curEv[0] = int32(i)
			} else {
				prev := &st.times[b]
				e := prev[0]
				if have&(1<<uint(b)) == 0 || t-e > w || (have&(2<<uint(b)) != 0 && cur[0] == e) || st.excl&(1<<uint(b)) != 0 {
					continue
				}
				have |= 2 << uint(b)
				st.excl &^= 2 << uint(b)
				prevEv := &st.evs[b]
				for j := range b {
					cur[j] = prev[j]
					curEv[j] = prevEv[j]
				}
				cur[b] = t
				curEv[b] = int32(i)
			}
			if b >= best || b+1 == best && !st.valid {
				best = b + 1
				st.valid = true
				for j := range best {
					st.path.Times[j] = cur[j]
					st.path.Events[j] = curEv[j]
				}
			}
		}
		if best == n {
			break
		}
		i = last
	}
	st.have, st.path.Step = have, best
	return i
}

// group processes the events with timestamp times[i] starting at index i
// and returns the index after the group.
func (st *FunnelScratch) group(times []int64, masks []uint64, i int, stepMask, xmask uint64, inRange bool, spec *FunnelSpec) int {
	t, w := times[i], spec.Window
	drop := uint64(0)
	if !inRange {
		drop = 1
	}
	var first, union, xs uint64
	same := true
	j := i
	for ; j < len(times) && times[j] == t; j++ {
		xs |= masks[j] & xmask
		m := masks[j] & stepMask &^ drop
		if m == 0 {
			continue
		}
		if union == 0 {
			first = m
		} else if m != first {
			same = false
		}
		union |= m
	}
	if union == 0 {
		if xs != 0 {
			st.exclude(t, xs, spec)
		}
		return j
	}
	if same {
		for e := i; e < j; e++ {
			m := masks[e] & stepMask &^ drop
			for m != 0 {
				b := 63 - bits.LeadingZeros64(m)
				m &^= 1 << uint(b)
				st.step(b+1, int32(e), t, w, false)
			}
		}
		return j
	}
	for u := union; u != 0; u &= u - 1 {
		b := bits.TrailingZeros64(u)
		for e := i; e < j; e++ {
			if masks[e]&(1<<uint(b)) != 0 {
				st.step(b+1, int32(e), t, w, true)
			}
		}
	}
	return j
}

// step processes event i (an index in the chunk) at time t for step k.
// checkUsed enables the "event already part of the attempt" test, which
// can only fail in mixed groups (within one event, steps run from highest
// to lowest, so the attempt at level k-1 never contains the event itself).
func (st *FunnelScratch) step(k int, i int32, t, w int64, checkUsed bool) {
	if k == 1 {
		if st.have&2 != 0 && st.times[1][0] == t {
			return
		}
		st.have |= 2
		st.excl &^= 2
		st.times[1][0] = t
		st.evs[1][0] = i
		if st.path.Step == 0 || st.path.Step == 1 && !st.valid {
			st.path.Step = 1
			st.valid = true
			st.path.Times[0] = t
			st.path.Events[0] = i
		}
		return
	}
	if st.have&(1<<uint(k-1)) == 0 || st.excl&(1<<uint(k-1)) != 0 {
		return
	}
	e := st.times[k-1][0]
	if t-e > w {
		return
	}
	if st.have&(1<<uint(k)) != 0 && st.times[k][0] == e {
		return
	}
	if checkUsed && slices.Contains(st.evs[k-1][:k-1], i) {
		return
	}
	st.have |= 1 << uint(k)
	st.excl &^= 1 << uint(k)
	copy(st.times[k][:k-1], st.times[k-1][:k-1])
	st.times[k][k-1] = t
	copy(st.evs[k][:k-1], st.evs[k-1][:k-1])
	st.evs[k][k-1] = i
	if k > st.path.Step || k == st.path.Step && !st.valid {
		st.path.Step = k
		st.valid = true
		copy(st.path.Times[:k], st.times[k][:k])
		copy(st.path.Events[:k], st.evs[k][:k])
	}
}

// exclude applies the exclusions with bits in xs to an event at time t
// matching no step at t (docs/analytics.md §11; see FunnelUser).
func (st *FunnelScratch) exclude(t int64, xs uint64, spec *FunnelSpec) {
	w := spec.Window
	for _, x := range spec.Exclusions {
		if xs&(1<<uint(x.Bit)) == 0 {
			continue
		}
		// Levels from the highest: an attempt's levels are consecutive
		// (entry times do not increase with the level), its furthest
		// step the first met.
		var t1 int64
		j := 0
		for h := st.have; h != 0; {
			k := 63 - bits.LeadingZeros64(h)
			h &^= 1 << uint(k)
			if e := st.times[k][0]; j == 0 || e != t1 {
				t1, j = e, k
			}
			if j >= x.From && j < x.To && t-t1 <= w {
				st.excl |= 1 << uint(k)
			}
		}
		if st.valid && st.path.Step >= x.From && st.path.Step < x.To && t-st.path.Times[0] <= w {
			st.valid = false
		}
	}
}

// entryEvents appends to dst the whole-trail indices of the step-1 events
// the user's outcome may still be attributed to: the counted attempt's
// and those of the attempts held at the levels (one of which may become
// the counted attempt in a later chunk).
func (st *FunnelScratch) entryEvents(dst []int32) []int32 {
	if st.path.Step > 0 {
		dst = append(dst, st.path.Events[0]+st.base)
	}
	for h := st.have; h != 0; h &= h - 1 {
		dst = append(dst, st.evs[bits.TrailingZeros64(h)][0]+st.base)
	}
	return dst
}
