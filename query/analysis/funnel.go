package analysis

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/spurdb/spur/trail"
)

// MaxFunnelSteps is the largest number of funnel steps (spec §5).
const MaxFunnelSteps = 32

// MaxFunnelWindow is the largest conversion window, 366 days in µs
// (spec §5).
const MaxFunnelWindow int64 = 366 * 86400 * 1e6

// FunnelSpec is a validated ordered-funnel query for the kernel (spec §5).
type FunnelSpec struct {
	// Steps is n, 2 ≤ n ≤ MaxFunnelSteps. Step k (1-based) is matched by
	// trail mask bit k-1; higher bits are ignored.
	Steps int
	// Window is the conversion window W in µs, inclusive: step k joins an
	// attempt entered at t1 when t - t1 ≤ W. 0 ≤ W ≤ MaxFunnelWindow.
	Window int64
	// From, To (UTC µs): a step-1 event opens an attempt only when
	// From ≤ t < To. Later steps may fall after To; the scan must supply
	// events up to To + Window.
	From, To int64
}

// Validate reports whether s is usable: 2 ≤ Steps ≤ MaxFunnelSteps,
// 0 ≤ Window ≤ MaxFunnelWindow and From < To. The error names the field.
func (s *FunnelSpec) Validate() error {
	if s.Steps < 2 || s.Steps > MaxFunnelSteps {
		return fmt.Errorf("analysis: funnel: %d steps, want 2 to %d", s.Steps, MaxFunnelSteps)
	}
	if s.Window < 0 || s.Window > MaxFunnelWindow {
		return fmt.Errorf("analysis: funnel: window %dµs outside [0, 366 days]", s.Window)
	}
	if s.From >= s.To {
		return fmt.Errorf("analysis: funnel: empty range [%d, %d)", s.From, s.To)
	}
	return nil
}

// FunnelPath is one user's funnel outcome.
type FunnelPath struct {
	// Step is the furthest step any attempt reached, 0 when no step-1
	// event lies in [From, To).
	Step int
	// Times[k-1] (UTC µs) is when the counted attempt reached step k, for
	// k = 1..Step. The counted attempt is the first attempt to reach Step.
	Times [MaxFunnelSteps]int64
	// Events[k-1] is the index, in the trail given to FunnelUser, of the
	// event that filled step k of the counted attempt (for breakdowns by
	// the step-1 event's property and for per-user lists).
	Events [MaxFunnelSteps]int32
}

// FunnelScratch is the per-user working state of FunnelUser: a fixed-size
// record (about 13 KiB) reused across users so that no per-event or
// per-user allocation happens. The zero value is ready; one goroutine at a
// time.
//
// Level k holds the attempt with the latest entry time among the attempts
// that have reached step k (PostHog's entered_timestamp[k]): its step
// times (the first is its entry time t1) and the trail indices of its step
// events.
type FunnelScratch struct {
	have uint64 // bit k set: level k holds an attempt
	// times[k][j] is when the level-k attempt reached step j+1;
	// times[k][0] is its entry time t1.
	times [MaxFunnelSteps + 1][MaxFunnelSteps]int64
	evs   [MaxFunnelSteps + 1][MaxFunnelSteps]int32
	path  FunnelPath
}

// FunnelUser runs the ordered-funnel algorithm of spec §5 (PostHog's
// funnel UDF, funnel-udf/src/steps.rs) over one user's trail and returns
// the user's outcome. spec must be valid (see FunnelSpec.Validate). The
// returned path points into st and is valid until the next call with st.
// No allocation.
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
// same entry time. Processing stops once step n is reached.
func FunnelUser(tr *trail.Trail, spec *FunnelSpec, st *FunnelScratch) *FunnelPath {
	n := spec.Steps
	stepMask := uint64(1)<<uint(n) - 1
	from := spec.From
	span := uint64(spec.To - spec.From)
	times := tr.Times
	masks := tr.Mask[:len(times)]
	st.have, st.path.Step = 0, 0
	for i := 0; i < len(times) && st.path.Step < n; {
		i = st.lone(times, masks, i, stepMask, from, span, spec.Window, n)
		if i < len(times) && st.path.Step < n {
			i = st.group(times, masks, i, stepMask, uint64(times[i]-from) < span, spec.Window)
		}
	}
	return &st.path
}

// lone processes events from index i up to the first tie group (or the
// end, or step n reached) and returns the index where it stopped. It is
// step() inlined by hand for lone events, kept free of calls so that the
// level bits and the result step stay in registers. A lone event's
// timestamp is unique in the trail, so no attempt entered at t exists yet
// (step 1 always opens) and the event is part of no attempt (no "already
// used" test).
//
// Runs of consecutive lone events with the same single step are
// collapsed: for step 1 only the run's last event matters (each opens an
// attempt that replaces the previous one at level 1; the first one may
// set the result), for a step k ≥ 2 only the first (the rest find the
// same level k-1 attempt and either fail the same way or find it already
// at step k).
func (st *FunnelScratch) lone(times []int64, masks []uint64, i int, stepMask uint64, from int64, span uint64, w int64, n int) int {
	masks = masks[:len(times)]
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
		if m == 1 {
			if best == 0 {
				best = 1
				st.path.Times[0] = t
				st.path.Events[0] = int32(i)
			}
			// Skip to the last lone in-range step-1 event of the run.
			for i+1 < len(times) && masks[i+1]&stepMask == 1 && uint64(times[i+1]-from) < span &&
				(i+2 == len(times) || times[i+2] != times[i+1]) {
				i++
			}
			have |= 2
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
				cur[0] = t
				curEv[0] = int32(i)
			} else {
				prev := &st.times[b]
				e := prev[0]
				if have&(1<<uint(b)) == 0 || t-e > w || (have&(2<<uint(b)) != 0 && cur[0] == e) {
					continue
				}
				have |= 2 << uint(b)
				prevEv := &st.evs[b]
				for j := range b {
					cur[j] = prev[j]
					curEv[j] = prevEv[j]
				}
				cur[b] = t
				curEv[b] = int32(i)
			}
			if b >= best {
				best = b + 1
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
func (st *FunnelScratch) group(times []int64, masks []uint64, i int, stepMask uint64, inRange bool, w int64) int {
	t := times[i]
	drop := uint64(0)
	if !inRange {
		drop = 1
	}
	var first, union uint64
	same := true
	j := i
	for ; j < len(times) && times[j] == t; j++ {
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
	if same {
		for e := i; e < j; e++ {
			m := masks[e] & stepMask &^ drop
			for m != 0 {
				b := 63 - bits.LeadingZeros64(m)
				m &^= 1 << uint(b)
				st.step(b+1, e, t, w, false)
			}
		}
		return j
	}
	for u := union; u != 0; u &= u - 1 {
		b := bits.TrailingZeros64(u)
		for e := i; e < j; e++ {
			if masks[e]&(1<<uint(b)) != 0 {
				st.step(b+1, e, t, w, true)
			}
		}
	}
	return j
}

// step processes event i at time t for step k. checkUsed enables the
// "event already part of the attempt" test, which can only fail in mixed
// groups (within one event, steps run from highest to lowest, so the
// attempt at level k-1 never contains the event itself).
func (st *FunnelScratch) step(k, i int, t, w int64, checkUsed bool) {
	if k == 1 {
		if st.have&2 != 0 && st.times[1][0] == t {
			return
		}
		st.have |= 2
		st.times[1][0] = t
		st.evs[1][0] = int32(i)
		if st.path.Step == 0 {
			st.path.Step = 1
			st.path.Times[0] = t
			st.path.Events[0] = int32(i)
		}
		return
	}
	if st.have&(1<<uint(k-1)) == 0 {
		return
	}
	e := st.times[k-1][0]
	if t-e > w {
		return
	}
	if st.have&(1<<uint(k)) != 0 && st.times[k][0] == e {
		return
	}
	if checkUsed && slices.Contains(st.evs[k-1][:k-1], int32(i)) {
		return
	}
	st.have |= 1 << uint(k)
	copy(st.times[k][:k-1], st.times[k-1][:k-1])
	st.times[k][k-1] = t
	copy(st.evs[k][:k-1], st.evs[k-1][:k-1])
	st.evs[k][k-1] = int32(i)
	if k > st.path.Step {
		st.path.Step = k
		copy(st.path.Times[:k], st.times[k][:k])
		copy(st.path.Events[:k], st.evs[k][:k])
	}
}

// FunnelStepResult is the outcome of one funnel step.
type FunnelStepResult struct {
	Step  int   // 1-based
	Users int64 // users who reached at least this step
	// Conversion is Users / users at step 1; ConversionFromPrevious is
	// Users / users at the previous step (step 1: the same as Conversion).
	// Both are 0 when the denominator is 0.
	Conversion, ConversionFromPrevious float64
	// HasTime is false for step 1 and for steps no user reached; then
	// AvgSeconds and MedianSeconds are 0 and should be rendered as null.
	HasTime bool
	// AvgSeconds and MedianSeconds: mean and exact median (linear
	// interpolation, spec §4) of the counted attempts' time from the
	// previous step to this one, over users who reached this step, in
	// seconds.
	AvgSeconds, MedianSeconds float64
}

// FunnelGroup is the funnel of one breakdown key (or of all users).
type FunnelGroup struct {
	Key   Key
	Steps []FunnelStepResult // Steps[k-1] is step k
	// List holds the users of FunnelSpec.List in this group (nil without a
	// list); it is a merged copy owned by the caller.
	List *UserList
}

// FunnelResult is the result of a Funnel: Steps[k-1] is step k over all
// users; Groups are the breakdown keys (without a breakdown, one group
// with the zero Key, equal to the whole), ordered by Key.
type FunnelResult struct {
	Steps  []FunnelStepResult
	List   *UserList // the list over all users (nil without a list)
	Groups []FunnelGroup
}

// FunnelList selects the users to list (spec §5: the users behind a step).
type FunnelList struct {
	// Step is k, 1 ≤ k ≤ Steps. Without Dropped the list holds the users
	// who reached at least step k; with Dropped those whose furthest step
	// is exactly k (they dropped off after step k).
	Step    int
	Dropped bool
	Keep    int // ids to keep per group (offset + limit of the page)
}

// funnelStats is the accumulated outcome of one group of users.
type funnelStats struct {
	key     Key
	reached [MaxFunnelSteps + 1]int64 // reached[k]: users whose result step is k
	// durs[k] (k = 2..n): µs from step k-1 to step k of each user who
	// reached step k; kept whole for the exact median.
	durs [MaxFunnelSteps + 1][]int64
	list UserList
}

// Funnel accumulates FunnelUser outcomes per breakdown key. Create it with
// NewFunnel; it is owned by one goroutine.
type Funnel struct {
	spec   FunnelSpec
	list   *FunnelList
	key    KeySource
	st     FunnelScratch
	groups []funnelStats
	table  slotTable
	bytes  int64
}

// NewFunnel validates spec (see FunnelSpec.Validate) and returns an empty
// accumulator. key says where a user's breakdown key comes from: for
// KeyEvent the column's value on the counted attempt's step-1 event (spec
// §5), for KeyUser the user's property. list, if not nil, selects users
// to list. Errors: an invalid spec or list step.
func NewFunnel(spec FunnelSpec, key KeySource, list *FunnelList) (*Funnel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if list != nil && (list.Step < 1 || list.Step > spec.Steps || list.Keep < 0 || list.Keep > MaxListKeep) {
		return nil, fmt.Errorf("analysis: funnel: list step %d (of %d) or keep %d out of range", list.Step, spec.Steps, list.Keep)
	}
	return &Funnel{spec: spec, key: key, list: list}, nil
}

// Add runs FunnelUser on one user's whole trail and accumulates the
// outcome. The trail is borrowed only for the call.
func (f *Funnel) Add(tr *trail.Trail) {
	f.AddPath(FunnelUser(tr, &f.spec, &f.st), tr)
}

// AddPath accumulates an outcome computed by FunnelUser with the same
// spec over tr (the trail supplies the breakdown key and the user id).
// Step 0 paths contribute nothing.
func (f *Funnel) AddPath(p *FunnelPath, tr *trail.Trail) {
	if p.Step == 0 {
		return
	}
	var k Key
	switch f.key.From {
	case KeyEvent:
		k = f.key.event(tr, int(p.Events[0]))
	case KeyUser:
		k = f.key.user(tr)
	}
	g, ok := f.table.get(k)
	if !ok {
		g = int32(len(f.groups))
		f.groups = append(f.groups, funnelStats{key: k})
		f.groups[g].list.Keep = f.keep()
		f.table.put(k, g)
		f.bytes += int64(unsafe.Sizeof(funnelStats{}))
	}
	st := &f.groups[g]
	st.reached[p.Step]++
	for k := 2; k <= p.Step; k++ {
		before := cap(st.durs[k])
		st.durs[k] = append(st.durs[k], p.Times[k-1]-p.Times[k-2])
		f.bytes += int64(cap(st.durs[k])-before) * 8
	}
	if l := f.list; l != nil && (p.Step == l.Step || (!l.Dropped && p.Step > l.Step)) {
		before := st.list.Bytes()
		st.list.Add(tr.ID)
		f.bytes += st.list.Bytes() - before
	}
}

func (f *Funnel) keep() int {
	if f.list == nil {
		return 0
	}
	return f.list.Keep
}

// Merge adds the outcomes of o, created from an equal spec, into f. o is
// not modified. It panics if the step counts differ (a programmer error).
func (f *Funnel) Merge(o *Funnel) {
	if o.spec.Steps != f.spec.Steps {
		panic("analysis: Funnel.Merge of accumulators with different specs")
	}
	for i := range o.groups {
		og := &o.groups[i]
		g, ok := f.table.get(og.key)
		if !ok {
			g = int32(len(f.groups))
			f.groups = append(f.groups, funnelStats{key: og.key})
			f.groups[g].list.Keep = f.keep()
			f.table.put(og.key, g)
		}
		mergeFunnelStats(&f.groups[g], og)
	}
}

func mergeFunnelStats(dst, o *funnelStats) {
	for k := range dst.reached {
		dst.reached[k] += o.reached[k]
	}
	for k := range dst.durs {
		dst.durs[k] = append(dst.durs[k], o.durs[k]...)
	}
	dst.list.Merge(&o.list)
}

// Bytes returns the memory the accumulator holds (groups, durations,
// listed ids), for the query's memory budget.
func (f *Funnel) Bytes() int64 {
	return int64(unsafe.Sizeof(*f)) + f.bytes + f.table.bytes()
}

// Result returns the per-step tables in newly allocated slices. group, if
// not nil, maps each breakdown key to the group it is reported under
// (funnel outcomes merge exactly: every user has one key). f stays
// usable. Without a list, a reported group made of a single breakdown
// key is computed on f's own duration lists, which the median selection
// reorders but does not change as multisets; other groups are gathered
// into lists allocated at their exact size. The all-users table is that
// of the only reported group when there is one (and no list), else
// gathered the same way. (Gathering every group twice through append
// was 3-5% of a 100M-event funnel's CPU time, all of it in the
// single-threaded merge phase.)
func (f *Funnel) Result(group func(Key) Key) FunnelResult {
	type reported struct {
		key     Key
		members []int32 // indexes into f.groups
	}
	var reps []reported
	at := map[Key]int{}
	for i := range f.groups {
		k := f.groups[i].key
		if group != nil {
			k = group(k)
		}
		r, ok := at[k]
		if !ok {
			r = len(reps)
			at[k] = r
			reps = append(reps, reported{key: k})
		}
		reps[r].members = append(reps[r].members, int32(i))
	}
	slices.SortFunc(reps, func(a, b reported) int { return compareKeys(a.key, b.key) })
	gather := func(key Key, members []int32) *funnelStats {
		if len(members) == 1 && f.list == nil {
			st := f.groups[members[0]] // shares the duration lists
			st.key = key
			return &st
		}
		st := &funnelStats{key: key}
		st.list.Keep = f.keep()
		for k := range st.durs {
			n := 0
			for _, m := range members {
				n += len(f.groups[m].durs[k])
			}
			if n > 0 {
				st.durs[k] = make([]int64, 0, n)
			}
		}
		for _, m := range members {
			mergeFunnelStats(st, &f.groups[m])
		}
		return st
	}
	var res FunnelResult
	for _, r := range reps {
		g := gather(r.key, r.members)
		fg := FunnelGroup{Key: g.key, Steps: f.steps(g)}
		if f.list != nil {
			fg.List = &g.list
		}
		res.Groups = append(res.Groups, fg)
	}
	if len(reps) == 1 && f.list == nil {
		res.Steps = slices.Clone(res.Groups[0].Steps)
	} else {
		every := make([]int32, len(f.groups))
		for i := range every {
			every[i] = int32(i)
		}
		all := gather(Key{}, every)
		res.Steps = f.steps(all)
		if f.list != nil {
			res.List = &all.list
		}
	}
	if f.key.From == KeyNone && len(res.Groups) == 0 {
		res.Groups = append(res.Groups, FunnelGroup{Steps: f.steps(&funnelStats{})})
	}
	return res
}

// steps computes the step table of st, reordering its duration lists
// (QuantileSelect).
func (f *Funnel) steps(st *funnelStats) []FunnelStepResult {
	n := f.spec.Steps
	users := make([]int64, n+2)
	for k := n; k >= 1; k-- {
		users[k] = users[k+1] + st.reached[k]
	}
	out := make([]FunnelStepResult, n)
	for k := 1; k <= n; k++ {
		r := FunnelStepResult{Step: k, Users: users[k]}
		r.Conversion = ratio(users[k], users[1])
		r.ConversionFromPrevious = r.Conversion
		if k >= 2 {
			r.ConversionFromPrevious = ratio(users[k], users[k-1])
			if d := st.durs[k]; len(d) > 0 {
				r.HasTime = true
				r.AvgSeconds = meanMicros(d) / 1e6
				r.MedianSeconds = QuantileSelect(d, 0.5) / 1e6
			}
		}
		out[k-1] = r
	}
	return out
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// meanMicros returns the mean of non-negative durations d as float64,
// summing exactly in 128 bits so that the result is independent of order
// and cannot overflow.
func meanMicros(d []int64) float64 {
	var hi, lo uint64
	for _, v := range d {
		var c uint64
		lo, c = bits.Add64(lo, uint64(v), 0)
		hi += c
	}
	return (float64(hi)*math.Exp2(64) + float64(lo)) / float64(len(d))
}
