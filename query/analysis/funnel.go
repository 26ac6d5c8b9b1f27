package analysis

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/spurdb/spur/trail"
)

// MaxFunnelSteps is the largest number of funnel steps (docs/analytics.md §5).
const MaxFunnelSteps = 32

// MaxFunnelWindow is the largest conversion window: 100 years of 365.25
// days, in µs (docs/analytics.md §5: W up to 100 years).
const MaxFunnelWindow int64 = 36525 * 86400 * 1e6

// FunnelOrder is how a funnel's steps must follow each other (docs/analytics.md §5,
// §11).
type FunnelOrder uint8

// Funnel orders. The zero value is the ordered funnel of docs/analytics.md §5.
const (
	OrderOrdered   FunnelOrder = iota // steps in order, other events in between allowed (docs/analytics.md §5)
	OrderStrict                       // steps in order, no other event in between (docs/analytics.md §11)
	OrderUnordered                    // steps in any order within the window (docs/analytics.md §11)
)

// FunnelView is what a funnel reports (docs/analytics.md §11).
type FunnelView uint8

// Funnel views. The zero value is the step table of docs/analytics.md §5.
const (
	ViewSteps         FunnelView = iota // users per step, conversions, times
	ViewTrends                          // conversion over time by the step-1 time's bucket
	ViewTimeToConvert                   // histogram of the time from one step to another
)

// FunnelAttribution selects the breakdown value of a user in a funnel
// broken down by an event property (docs/analytics.md §11).
type FunnelAttribution uint8

// Breakdown attributions. The zero value is entry.
const (
	AttrEntry      FunnelAttribution = iota // the value on the counted attempt's step-1 event
	AttrFirstTouch                          // the value on the user's first step event that has one
	AttrLastTouch                           // the value on the user's last step event that has one
	AttrAllSteps                            // one funnel per value, on the events with that value
	AttrStep                                // one funnel per value of step k's events, step k filled by them only
)

var (
	orderNames = []string{"ordered", "strict", "unordered"}
	viewNames  = []string{"steps", "trends", "time_to_convert"}
	attrNames  = []string{"entry", "first_touch", "last_touch", "all_steps", "step"}
)

// String returns the query-language name ("ordered", "strict", "unordered").
func (o FunnelOrder) String() string { return enumString(orderNames, uint8(o), "order") }

// String returns the query-language name ("steps", "trends", "time_to_convert").
func (v FunnelView) String() string { return enumString(viewNames, uint8(v), "view") }

// String returns the query-language name ("entry", "first_touch",
// "last_touch", "all_steps", "step").
func (a FunnelAttribution) String() string { return enumString(attrNames, uint8(a), "attribution") }

// ParseFunnelOrder parses "ordered", "strict" or "unordered"; "" is the
// default ordered. Other input returns an error listing the names.
func ParseFunnelOrder(s string) (FunnelOrder, error) {
	v, err := enumParse(orderNames, s, "funnel order", true)
	return FunnelOrder(v), err
}

// ParseFunnelView parses "steps", "trends" or "time_to_convert"; "" is the
// default steps. Other input returns an error listing the names.
func ParseFunnelView(s string) (FunnelView, error) {
	v, err := enumParse(viewNames, s, "funnel view", true)
	return FunnelView(v), err
}

// ParseFunnelAttribution parses "entry", "first_touch", "last_touch",
// "all_steps" or "step" (the step number is a separate field); "" is the
// default entry. Other input returns an error listing the names.
func ParseFunnelAttribution(s string) (FunnelAttribution, error) {
	v, err := enumParse(attrNames, s, "breakdown attribution", true)
	return FunnelAttribution(v), err
}

// FunnelExclusion excludes attempts between two steps (docs/analytics.md §11): an
// event with mask bit Bit excludes an attempt whose furthest step j is in
// [From, To) when it comes after the attempt reached j, at most W after
// its entry, at a timestamp where the user has no step event.
type FunnelExclusion struct {
	Bit      int // trail mask bit of the exclusion's matcher, not a step bit
	From, To int // 1 ≤ From < To ≤ Steps
}

// FunnelSpec is a validated funnel query for the kernel (docs/analytics.md §5, §11).
type FunnelSpec struct {
	// Steps is n, 2 ≤ n ≤ MaxFunnelSteps. Step k (1-based) is matched by
	// trail mask bit k-1; higher bits are ignored unless named below.
	Steps int
	// Window is the conversion window W in µs, inclusive: step k joins an
	// attempt entered at t1 when t - t1 ≤ W. 0 ≤ W ≤ MaxFunnelWindow.
	Window int64
	// From, To (UTC µs): a step-1 event opens an attempt only when
	// From ≤ t < To (an unordered window's first event, likewise). Later
	// steps may fall after To; the scan must supply events up to
	// To + Window.
	From, To int64
	// Order is ordered (the zero value), strict or unordered.
	Order FunnelOrder
	// Events holds the mask bits of the events a strict funnel considers
	// besides step and exclusion events: the query's matcher of every
	// event passing its global filters, so that a non-step event ends
	// attempts. Ignored in the other orders.
	Events uint64
	// Exclusions (docs/analytics.md §11); an unordered funnel takes only From 1, To n.
	Exclusions []FunnelExclusion
}

// Validate reports whether s is usable: 2 ≤ Steps ≤ MaxFunnelSteps,
// 0 ≤ Window ≤ MaxFunnelWindow, From < To, a known order, exclusion bits
// outside the steps' and ranges 1 ≤ From < To ≤ Steps (1 and Steps in an
// unordered funnel). The error names the field.
func (s *FunnelSpec) Validate() error {
	if s.Steps < 2 || s.Steps > MaxFunnelSteps {
		return fmt.Errorf("analysis: funnel: %d steps, want 2 to %d", s.Steps, MaxFunnelSteps)
	}
	if s.Window < 0 || s.Window > MaxFunnelWindow {
		return fmt.Errorf("analysis: funnel: window %dµs outside [0, 100 years]", s.Window)
	}
	if s.From >= s.To {
		return fmt.Errorf("analysis: funnel: empty range [%d, %d)", s.From, s.To)
	}
	if s.Order > OrderUnordered {
		return fmt.Errorf("analysis: funnel: invalid order %d", s.Order)
	}
	for i, x := range s.Exclusions {
		switch {
		case x.Bit < s.Steps || x.Bit > 63:
			return fmt.Errorf("analysis: funnel: exclusion %d: mask bit %d is a step's or out of range", i, x.Bit)
		case x.From < 1 || x.From >= x.To || x.To > s.Steps:
			return fmt.Errorf("analysis: funnel: exclusion %d: steps %d to %d, want 1 ≤ from < to ≤ %d", i, x.From, x.To, s.Steps)
		case s.Order == OrderUnordered && (x.From != 1 || x.To != s.Steps):
			return fmt.Errorf("analysis: funnel: exclusion %d: an unordered funnel takes exclusions from step 1 to %d only", i, s.Steps)
		}
	}
	return nil
}

// FunnelOptions says what a Funnel accumulates besides the spec.
type FunnelOptions struct {
	// View: the step table (default), conversion over time or time to
	// convert.
	View FunnelView
	// FromStep and ToStep (trends and time-to-convert views): 1 ≤
	// FromStep < ToStep ≤ Steps; 0 means 1 and Steps.
	FromStep, ToStep int
	// Bounds are the trends view's bucket boundaries (UTC µs, strictly
	// increasing, covering [From, To)): attempts are bucketed by their
	// step-1 time.
	Bounds []int64
	// Bins is the time-to-convert histogram's number of bins, 1 to
	// MaxFunnelBins; 0 means ⌈∛u⌉ clamped to 1..60 (u: users counted).
	Bins int
	// Key is the breakdown's source: an event column (read as
	// Attribution says) or a user property.
	Key KeySource
	// Attribution selects the value of an event-column breakdown; AttrStep
	// is k for AttrStep (1 ≤ k ≤ Steps; 1 in an unordered funnel).
	Attribution FunnelAttribution
	AttrStep    int
	// Group, for AttrAllSteps and AttrStep, maps each value to the row it
	// is walked in before the walk (nil: its own), so that a merged
	// "(other)" row is a funnel of its own over the merged values (a
	// user counted once), not a sum of rows. DropKept is not allowed.
	Group *KeyGroup
	// List selects users to list; nil lists none.
	List *FunnelList
	// Observe, when not nil, receives each user's outcomes (for tests;
	// the slices are borrowed for the call).
	Observe func(id []byte, outs []FunnelOutcome)
}

// MaxFunnelBins is the largest number of time-to-convert bins (docs/analytics.md §11).
const MaxFunnelBins = 90

// FunnelList selects the users to list (docs/analytics.md §7): those behind a step
// (steps view), a bucket's entered or converted users (trends view), or a
// histogram bin (time-to-convert view).
type FunnelList struct {
	// Step is k, 1 ≤ k ≤ Steps (steps view). Without Dropped the list
	// holds the users who reached at least step k; with Dropped those
	// whose furthest step is exactly k (they dropped off after step k).
	Step    int
	Dropped bool
	// Bucket is the index of a trends-view bucket; Converted lists its
	// converted users, else its entered ones.
	Bucket    int
	Converted bool
	// Bin is a bin of the time-to-convert histogram whose bins start at
	// BinLo seconds and are BinWidth seconds wide, Bins of them (the
	// histogram of a first run without a list: see FunnelHist).
	Bin, Bins       int
	BinLo, BinWidth int64
	Keep            int // ids to keep per group (offset + limit of the page)
}

// FunnelOutcome is one user's outcome as Observe reports it: in a
// breakdown row, for a bucket (trends view, else 0), the furthest step,
// the counted attempt's step times (unordered: the counted window's
// sorted first times per step) and the whole-trail index of its first
// event. In the trends view, which reports the row and the step only,
// Times and First are those of an attempt of the bucket that reached the
// step, not necessarily the first.
type FunnelOutcome struct {
	Row    Key
	Bucket int
	Step   int
	Times  []int64
	First  int
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
	// interpolation, docs/analytics.md §4) of the counted attempts' time from the
	// previous step to this one, over users who reached this step, in
	// seconds.
	AvgSeconds, MedianSeconds float64
}

// FunnelBucket is one bucket of the trends view: users with an attempt
// entered in the bucket that reached the from step (Entered) and the to
// step (Converted).
type FunnelBucket struct {
	Entered, Converted int64
}

// FunnelHist is a time-to-convert histogram (docs/analytics.md §11): Bins[i] counts
// the users whose time is in [Lo + i·Width, Lo + (i+1)·Width) seconds,
// the last bin also holding its end. Users, AvgSeconds and MedianSeconds
// are over the users counted (HasTime false when there are none).
type FunnelHist struct {
	Lo, Width                 int64 // seconds
	Bins                      []int64
	Users                     int64
	HasTime                   bool
	AvgSeconds, MedianSeconds float64
}

// FunnelGroup is the funnel of one breakdown key (or of all users).
type FunnelGroup struct {
	Key Key
	// Users ranks breakdown values: users at step 1 (steps view), users
	// entered summed over the buckets (trends), users counted (time to
	// convert).
	Users   int64
	Steps   []FunnelStepResult // steps view: Steps[k-1] is step k
	Buckets []FunnelBucket     // trends view
	Hist    *FunnelHist        // time-to-convert view
	// List holds the users of FunnelOptions.List in this group (nil
	// without a list); it is a merged copy owned by the caller.
	List *UserList
}

// FunnelResult is the result of a Funnel: the tables over all users (each
// counted once, also when the attribution puts a user in several rows)
// and the breakdown keys' Groups (without a breakdown, one group with the
// zero Key, equal to the whole), ordered by Key.
type FunnelResult struct {
	Steps   []FunnelStepResult
	Buckets []FunnelBucket
	Hist    *FunnelHist
	List    *UserList // the list over all users (nil without a list)
	Groups  []FunnelGroup
}

// funnelStats is the accumulated outcome of one group of users.
type funnelStats struct {
	key     Key
	reached [MaxFunnelSteps + 1]int64 // reached[k]: users whose result step is k
	// durs[k] (k = 2..n, steps view): µs from step k-1 to step k of each
	// user who reached step k; kept whole for the exact median. durs[0]
	// (time-to-convert view): µs from the from step to the to step.
	durs [MaxFunnelSteps + 1][]int64
	// entered and converted per bucket (trends view)
	entered, converted []int64
	list               UserList
}

// funnelMode is the walker that answers a funnel.
type funnelMode uint8

const (
	modeFast      funnelMode = iota // FunnelUser: ordered, steps or time-to-convert view
	modeGeneral                     // genWalker: strict order, trends view
	modeUnordered                   // unoWalker
)

// Funnel accumulates users' funnel outcomes per breakdown key. Create it
// with NewFunnel; it is owned by one goroutine.
type Funnel struct {
	spec     FunnelSpec
	opt      FunnelOptions
	from, to int // the view's steps
	mode     funnelMode
	env      walkEnv // the walkers' shared environment (they point at it)
	st       FunnelScratch
	gen      *genWalker
	uno      *unoWalker
	captures bool // walkers capture the entry value of step-1 events
	fast     bool // a whole trail goes straight through FunnelUser and addPath
	// trendsFast: an ordered trends-view funnel without exclusions whose
	// window is at most the shortest bucket, and without entry values
	// (each bucket's counted attempt may differ from the general walk's):
	// whole trails go through FunnelUser once per bucket (trendOutcomes)
	trendsFast bool
	bspec      FunnelSpec      // trendOutcomes: the spec of one bucket
	fouts      []funnelOutcome // outcomes of the whole-trail paths
	// fast mode, entry values across chunks
	fkeys, fkeys2 []fastKey
	refs          []int32
	touch         Key // first/last touch value of the current user
	touched       bool
	rows          *funnelRows // per-row attributions
	group         *keyGrouper // opt.Group, or nil
	funnelState
	bytes int64
	obs   []FunnelOutcome
	one   [1]funnelOutcome
}

// funnelState is the mergeable state of a Funnel: what Merge combines and
// AppendBinary writes. Everything else in a Funnel (walkers, the current
// user's buffers and entry values) is per-user scratch.
type funnelState struct {
	total  *funnelStats  // all users (per-row attributions), else nil
	groups []funnelStats // per breakdown key (row)
	table  slotTable     // key → index in groups
}

type fastKey struct {
	idx int32
	key Key
}

// NewFunnel validates spec (see FunnelSpec.Validate) and opt and returns
// an empty accumulator. Errors: an invalid spec, view steps, bounds, bins,
// attribution or list.
func NewFunnel(spec FunnelSpec, opt FunnelOptions) (*Funnel, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	n := spec.Steps
	f := &Funnel{spec: spec, opt: opt, from: opt.FromStep, to: opt.ToStep, group: newKeyGrouper(opt.Group)}
	f.spec.Exclusions = slices.Clone(spec.Exclusions)
	if f.from == 0 {
		f.from = 1
	}
	if f.to == 0 {
		f.to = n
	}
	if opt.View > ViewTimeToConvert {
		return nil, fmt.Errorf("analysis: funnel: invalid view %d", opt.View)
	}
	if opt.View != ViewSteps && (f.from < 1 || f.from >= f.to || f.to > n) {
		return nil, fmt.Errorf("analysis: funnel: steps %d to %d, want 1 ≤ from < to ≤ %d", f.from, f.to, n)
	}
	if opt.View == ViewTrends {
		if err := checkBounds("funnel", opt.Bounds, spec.From, spec.To); err != nil {
			return nil, err
		}
	}
	if opt.Group != nil && opt.Group.DropKept {
		return nil, fmt.Errorf("analysis: funnel: a group cannot drop values")
	}
	if opt.Bins < 0 || opt.Bins > MaxFunnelBins {
		return nil, fmt.Errorf("analysis: funnel: %d bins, want 1 to %d", opt.Bins, MaxFunnelBins)
	}
	switch {
	case opt.Attribution > AttrStep:
		return nil, fmt.Errorf("analysis: funnel: invalid attribution %d", opt.Attribution)
	case opt.Attribution != AttrEntry && opt.Key.From != KeyEvent:
		return nil, fmt.Errorf("analysis: funnel: attribution %s needs an event property breakdown", opt.Attribution)
	case opt.Attribution == AttrStep && (opt.AttrStep < 1 || opt.AttrStep > n):
		return nil, fmt.Errorf("analysis: funnel: attribution step %d, want 1 to %d", opt.AttrStep, n)
	case opt.Attribution == AttrStep && spec.Order == OrderUnordered && opt.AttrStep != 1:
		return nil, fmt.Errorf("analysis: funnel: an unordered funnel attributes to step 1 only, not %d", opt.AttrStep)
	}
	if l := opt.List; l != nil {
		bad := l.Keep < 0 || l.Keep > MaxListKeep
		switch opt.View {
		case ViewSteps:
			bad = bad || l.Step < 1 || l.Step > n
		case ViewTrends:
			bad = bad || l.Bucket < 0 || l.Bucket >= len(opt.Bounds)-1
		case ViewTimeToConvert:
			bad = bad || l.Bins < 1 || l.Bins > MaxFunnelBins || l.Bin < 0 || l.Bin >= l.Bins || l.BinWidth < 1
		}
		if bad {
			return nil, fmt.Errorf("analysis: funnel: list %+v out of range", *l)
		}
	}
	f.captures = opt.Key.From == KeyEvent && opt.Attribution == AttrEntry
	switch {
	case spec.Order == OrderUnordered:
		f.mode = modeUnordered
	case spec.Order == OrderStrict || opt.View == ViewTrends:
		f.mode = modeGeneral
	}
	f.fast = f.mode == modeFast && opt.Attribution == AttrEntry && opt.Observe == nil && opt.View == ViewSteps
	f.env.init(&f.spec, opt.View == ViewTrends, opt.Bounds, f.captures)
	f.trendsFast = f.mode == modeGeneral && spec.Order == OrderOrdered && opt.View == ViewTrends && opt.Attribution == AttrEntry &&
		len(spec.Exclusions) == 0 && spec.Window <= f.env.bix.shortest && !f.captures
	switch f.mode {
	case modeGeneral:
		f.gen = newGenWalker(&f.env)
	case modeUnordered:
		f.uno = newUnoWalker(&f.env)
	}
	if opt.Attribution == AttrAllSteps || opt.Attribution == AttrStep {
		f.rows = newFunnelRows(f)
		f.total = &funnelStats{}
		f.initStats(f.total)
	}
	return f, nil
}

// Add runs the funnel over one chunk of a user's trail (package trail) and,
// on the user's last chunk, accumulates the user's outcomes. The trail is
// borrowed only for the call.
func (f *Funnel) Add(tr *trail.Trail) {
	whole := !tr.More && tr.Offset == 0
	if whole && f.trendsFast && singleSteps(tr.Mask[:len(tr.Times)], f.env.stepMask) {
		f.account(tr, f.trendOutcomes(tr))
		return
	}
	if f.fast && whole {
		// The common case: a whole trail in one chunk.
		if p := FunnelUser(tr, &f.spec, &f.st); p.Step > 0 {
			var g int32 // without a breakdown, the one group: no lookup
			if f.opt.Key.From != KeyNone || len(f.groups) == 0 {
				k := Key{}
				switch f.opt.Key.From {
				case KeyEvent:
					k = f.opt.Key.event(tr, int(p.Events[0]))
				case KeyUser:
					k = f.opt.Key.user(tr)
				}
				var ok bool
				if g, ok = f.table.get(k); !ok {
					g = f.newGroup(k)
				}
			}
			f.addSteps(&f.groups[g], p, tr.ID)
		}
		return
	}
	if tr.Offset == 0 {
		f.begin()
	}
	var keys *trail.Column
	if f.captures {
		keys = &tr.Cols[f.opt.Key.Index]
	}
	masks := tr.Mask[:len(tr.Times)]
	if f.rows != nil {
		f.rows.chunk(tr, masks)
	}
	var p *FunnelPath
	switch f.mode {
	case modeFast:
		p = FunnelUser(tr, &f.spec, &f.st)
		if f.captures {
			f.captureFastKeys(tr)
		}
	case modeGeneral:
		f.gen.chunk(tr, masks, keys)
	case modeUnordered:
		f.uno.chunk(tr, masks, keys)
	}
	if a := f.opt.Attribution; a == AttrFirstTouch || a == AttrLastTouch {
		f.touchChunk(tr, a == AttrLastTouch)
	}
	if tr.More {
		return
	}
	var outs []funnelOutcome
	switch f.mode {
	case modeFast:
		if p.Step > 0 {
			o := funnelOutcome{step: int32(p.Step), first: p.Events[0], times: p.Times}
			if f.captures {
				o.key = f.fastKey(tr, p.Events[0])
			}
			f.one[0] = o
			outs = f.one[:]
		}
	case modeGeneral:
		outs = f.gen.finish()
	case modeUnordered:
		outs = f.uno.finish()
	}
	f.account(tr, outs)
}

// account accumulates the user's outcomes (tr: the user's last chunk).
func (f *Funnel) account(tr *trail.Trail, outs []funnelOutcome) {
	if f.rows != nil {
		// The plain outcome counts the user once over all users; the rows
		// are the breakdown.
		for i := range outs {
			f.addOutcome(f.total, &outs[i], tr.ID)
		}
		rows := f.rows.finish()
		for i := range rows {
			f.addOutcome(f.stats(rows[i].key), &rows[i].funnelOutcome, tr.ID)
		}
		f.observeRows(tr.ID, rows)
		return
	}
	for i := range outs {
		k := f.keyOf(tr, &outs[i])
		f.addOutcome(f.stats(k), &outs[i], tr.ID)
	}
	f.observe(tr.ID, outs, func(o *funnelOutcome) Key { return f.keyOf(tr, o) })
}

// trendOutcomes returns the outcomes of the trends view (docs/analytics.md §11) over
// the whole trail tr, valid until the next call: for each bucket with a
// step-1 event in [From, To), FunnelUser over the events from that
// event's tie group to the last time an attempt of the bucket may advance
// (its end - 1 + W), with step 1 restricted to the bucket. Within one
// bucket the §5 walk, in which only the newest attempt at level k-1
// advances, reaches the same furthest step as letting every attempt
// advance (a newer attempt at a level has at least the older one's
// window left and can take every later step event the older one can),
// and the trends view reports nothing else per bucket. That holds when
// no event matches two steps (singleSteps): an event that opens an
// attempt and matches a later step too is skipped by that attempt in a
// tie group but advances older ones.
// With W at most the shortest bucket (trendsFast) an event is read at
// most twice; the general walker reads it once at several times the
// cost per event (funnel4_trends_week at 100M: 320 ms on genWalker,
// 211 ms this way; the plain scan of its columns 132–142 ms).
func (f *Funnel) trendOutcomes(tr *trail.Trail) []funnelOutcome {
	env := &f.env
	times, masks := tr.Times, tr.Mask[:len(tr.Times)]
	from, to, win := f.spec.From, f.spec.To, f.spec.Window
	outs := f.fouts[:0]
	f.bspec = f.spec
	for i := 0; ; {
		for i < len(times) && (masks[i]&1 == 0 || uint64(times[i]-from) >= env.span) {
			i++
		}
		if i == len(times) {
			break
		}
		b := env.bix.of(times[i])
		lo, hi := env.bounds[b], env.bounds[b+1]
		s := i
		for s > 0 && times[s-1] == times[i] {
			s-- // a tie group is walked whole
		}
		// The events up to the last time an attempt of b may advance.
		j, _ := slices.BinarySearch(times[i:], hi+win) // the first after hi - 1 + win
		j += i
		f.bspec.From, f.bspec.To = max(from, lo), min(to, hi)
		sub := trail.Trail{Times: times[s:j], Mask: masks[s:j]}
		if p := FunnelUser(&sub, &f.bspec, &f.st); p.Step > 0 {
			outs = slices.Grow(outs, 1)[:len(outs)+1]
			o := &outs[len(outs)-1]
			o.bucket, o.step, o.first, o.key = int32(b), int32(p.Step), int32(s)+p.Events[0], Key{}
			copy(o.times[:p.Step], p.Times[:p.Step])
		}
		for i < len(times) && times[i] < hi {
			i++
		}
	}
	f.fouts = outs
	return outs
}

// singleSteps reports whether no mask has two of the step bits set.
func singleSteps(masks []uint64, steps uint64) bool {
	var multi uint64
	for _, m := range masks {
		x := m & steps
		multi |= x & (x - 1)
	}
	return multi == 0
}

// begin resets the per-user state.
func (f *Funnel) begin() {
	f.fkeys = f.fkeys[:0]
	f.touch, f.touched = Key{}, false
	switch f.mode {
	case modeGeneral:
		f.gen.reset()
	case modeUnordered:
		f.uno.reset()
	}
	if f.rows != nil {
		f.rows.reset()
	}
}

// keyOf returns the breakdown key of an outcome of a single-row
// attribution.
func (f *Funnel) keyOf(tr *trail.Trail, o *funnelOutcome) Key {
	switch f.opt.Key.From {
	case KeyUser:
		return f.opt.Key.user(tr)
	case KeyEvent:
		if f.opt.Attribution == AttrEntry {
			return o.key
		}
		return f.touch
	}
	return Key{}
}

// captureFastKeys keeps, at the end of a chunk, the entry values of the
// step-1 events the fast walker's outcome may be attributed to (the
// chunk's events are gone by the next chunk).
func (f *Funnel) captureFastKeys(tr *trail.Trail) {
	if !tr.More {
		return
	}
	f.refs = f.st.entryEvents(f.refs[:0])
	next := f.fkeys2[:0]
	for _, idx := range f.refs {
		next = append(next, fastKey{idx: idx, key: f.fastKey(tr, idx)})
	}
	f.fkeys, f.fkeys2 = next, f.fkeys
}

// fastKey returns the entry value of event idx (whole-trail index): from
// the chunk, or as captured at the end of an earlier one.
func (f *Funnel) fastKey(tr *trail.Trail, idx int32) Key {
	if i := int(idx) - tr.Offset; i >= 0 {
		return f.opt.Key.event(tr, i)
	}
	for _, k := range f.fkeys {
		if k.idx == idx {
			return k.key
		}
	}
	return Key{}
}

// touchChunk finds the first (or, with last, the latest) event of the
// chunk in [From, To+W] that matches some step and has the breakdown
// property set (docs/analytics.md §11 first_touch / last_touch).
func (f *Funnel) touchChunk(tr *trail.Trail, last bool) {
	if f.touched && !last {
		return
	}
	col := &tr.Cols[f.opt.Key.Index]
	ok := func(i int) bool {
		t := tr.Times[i]
		return tr.Mask[i]&f.env.stepMask != 0 && col.Set[i] && t >= f.spec.From && t-f.spec.To <= f.spec.Window
	}
	if last {
		for i := len(tr.Times) - 1; i >= 0; i-- {
			if ok(i) {
				f.touch, f.touched = Key{Bits: col.Bits[i], Set: true}, true
				return
			}
		}
		return
	}
	for i := range tr.Times {
		if ok(i) {
			f.touch, f.touched = Key{Bits: col.Bits[i], Set: true}, true
			return
		}
	}
}

// stats returns the group of key k, creating it.
func (f *Funnel) stats(k Key) *funnelStats {
	g, ok := f.table.get(k)
	if !ok {
		g = f.newGroup(k)
	}
	return &f.groups[g]
}

// newGroup adds the group of key k (absent) and returns its index.
func (f *Funnel) newGroup(k Key) int32 {
	g := int32(len(f.groups))
	f.groups = append(f.groups, funnelStats{key: k})
	f.initStats(&f.groups[g])
	f.table.put(k, g)
	f.bytes += int64(unsafe.Sizeof(funnelStats{})) + int64(len(f.groups[g].entered))*16
	return g
}

func (f *Funnel) initStats(st *funnelStats) {
	st.list.Keep = f.keep()
	if f.opt.View == ViewTrends {
		st.entered = make([]int64, len(f.opt.Bounds)-1)
		st.converted = make([]int64, len(f.opt.Bounds)-1)
	}
}

// addPath accumulates an outcome computed by FunnelUser.
func (f *Funnel) addPath(st *funnelStats, p *FunnelPath, id []byte) {
	if f.opt.View != ViewSteps {
		o := funnelOutcome{step: int32(p.Step), times: p.Times}
		f.addOutcome(st, &o, id)
		return
	}
	f.addSteps(st, p, id)
}

// addSteps accumulates a steps-view outcome computed by FunnelUser.
func (f *Funnel) addSteps(st *funnelStats, p *FunnelPath, id []byte) {
	st.reached[p.Step]++
	for k := 2; k <= p.Step; k++ {
		before := cap(st.durs[k])
		st.durs[k] = append(st.durs[k], p.Times[k-1]-p.Times[k-2])
		f.bytes += int64(cap(st.durs[k])-before) * 8
	}
	if l := f.opt.List; l != nil && (p.Step == l.Step || (!l.Dropped && p.Step > l.Step)) {
		f.listAdd(st, id)
	}
}

// addOutcome accumulates an outcome in st.
func (f *Funnel) addOutcome(st *funnelStats, o *funnelOutcome, id []byte) {
	step := int(o.step)
	l := f.opt.List
	switch f.opt.View {
	case ViewSteps:
		st.reached[step]++
		for k := 2; k <= step; k++ {
			before := cap(st.durs[k])
			st.durs[k] = append(st.durs[k], o.times[k-1]-o.times[k-2])
			f.bytes += int64(cap(st.durs[k])-before) * 8
		}
		if l != nil && (step == l.Step || (!l.Dropped && step > l.Step)) {
			f.listAdd(st, id)
		}
	case ViewTrends:
		b := o.bucket
		if step >= f.from {
			st.entered[b]++
		}
		if step >= f.to {
			st.converted[b]++
		}
		if l != nil && int(b) == l.Bucket && step >= f.from && (!l.Converted || step >= f.to) {
			f.listAdd(st, id)
		}
	case ViewTimeToConvert:
		if step < f.to {
			return
		}
		d := o.times[f.to-1] - o.times[f.from-1]
		before := cap(st.durs[0])
		st.durs[0] = append(st.durs[0], d)
		f.bytes += int64(cap(st.durs[0])-before) * 8
		if l != nil && binOf(d, l.BinLo, l.BinWidth, l.Bins) == l.Bin {
			f.listAdd(st, id)
		}
	}
}

func (f *Funnel) listAdd(st *funnelStats, id []byte) {
	before := st.list.Bytes()
	st.list.Add(id)
	f.bytes += st.list.Bytes() - before
}

// observe reports outcomes to Observe.
func (f *Funnel) observe(id []byte, outs []funnelOutcome, key func(*funnelOutcome) Key) {
	if f.opt.Observe == nil {
		return
	}
	f.obs = f.obs[:0]
	for i := range outs {
		o := &outs[i]
		f.obs = append(f.obs, FunnelOutcome{Row: key(o), Bucket: int(o.bucket), Step: int(o.step),
			Times: slices.Clone(o.times[:o.step]), First: int(o.first)})
	}
	f.opt.Observe(id, f.obs)
}

func (f *Funnel) observeRows(id []byte, rows []rowOutcome) {
	if f.opt.Observe == nil {
		return
	}
	f.obs = f.obs[:0]
	for i := range rows {
		o := &rows[i]
		f.obs = append(f.obs, FunnelOutcome{Row: o.key, Bucket: int(o.bucket), Step: int(o.step),
			Times: slices.Clone(o.times[:o.step]), First: int(o.first)})
	}
	f.opt.Observe(id, f.obs)
}

// AddPath accumulates an outcome computed by FunnelUser with the same
// spec over tr, a whole trail (one chunk) that supplies the breakdown key
// (entry or user property) and the user id. Step 0 paths contribute
// nothing.
func (f *Funnel) AddPath(p *FunnelPath, tr *trail.Trail) {
	if p.Step == 0 {
		return
	}
	var k Key
	switch f.opt.Key.From {
	case KeyEvent:
		k = f.opt.Key.event(tr, int(p.Events[0]))
	case KeyUser:
		k = f.opt.Key.user(tr)
	}
	f.addPath(f.stats(k), p, tr.ID)
}

func (f *Funnel) keep() int {
	if f.opt.List == nil {
		return 0
	}
	return f.opt.List.Keep
}

// Merge adds the outcomes of o, created from an equal spec and options,
// (or decoded with DecodeFunnel) into f. o is not modified. Another spec
// or options (Observe aside) is an error wrapping ErrState, and f is left
// unchanged.
func (f *Funnel) Merge(o *Funnel) error {
	if err := f.sameSpec(o); err != nil {
		return err
	}
	for i := range o.groups {
		mergeFunnelStats(f.stats(o.groups[i].key), &o.groups[i])
	}
	if f.total != nil {
		mergeFunnelStats(f.total, o.total)
	}
	return nil
}

func mergeFunnelStats(dst, o *funnelStats) {
	for k := range dst.reached {
		dst.reached[k] += o.reached[k]
	}
	for k := range dst.durs {
		dst.durs[k] = append(dst.durs[k], o.durs[k]...)
	}
	for b := range dst.entered {
		dst.entered[b] += o.entered[b]
		dst.converted[b] += o.converted[b]
	}
	dst.list.Merge(&o.list)
}

// Bytes returns the memory the accumulator holds (groups, durations,
// listed ids, the walkers' per-user state), for the query's memory
// budget.
func (f *Funnel) Bytes() int64 {
	n := int64(unsafe.Sizeof(*f)) + f.bytes + f.table.bytes() + int64(cap(f.fkeys)+cap(f.fkeys2))*24
	if f.gen != nil {
		n += f.gen.bytes()
	}
	if f.uno != nil {
		n += f.uno.bytes()
	}
	if f.rows != nil {
		n += f.rows.bytes()
	}
	return n
}

// Result returns the tables in newly allocated slices. group, if not nil,
// maps each breakdown key to the group it is reported under (funnel
// outcomes merge exactly: every outcome has one key). f stays usable.
// Without a list, a reported group made of a single breakdown key is
// computed on f's own duration lists, which the median selection
// reorders but does not change as multisets; other groups are gathered
// into lists allocated at their exact size. The all-users table is that
// of the only reported group when there is one (and no list, and one row
// per user), else gathered the same way. (Gathering every group twice
// through append was 3-5% of a 100M-event funnel's CPU time, all of it
// in the single-threaded merge phase.)
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
		if len(members) == 1 && f.opt.List == nil {
			st := f.groups[members[0]] // shares the duration lists
			st.key = key
			return &st
		}
		st := &funnelStats{key: key}
		f.initStats(st)
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
	gathered := make([]*funnelStats, len(reps))
	for i, r := range reps {
		gathered[i] = gather(r.key, r.members)
	}
	var all *funnelStats
	switch {
	case f.total != nil:
		all = f.total
	case len(reps) == 1 && f.opt.List == nil:
		all = gathered[0]
	default:
		every := make([]int32, len(f.groups))
		for i := range every {
			every[i] = int32(i)
		}
		all = gather(Key{}, every)
	}
	var res FunnelResult
	var lo, width int64
	var bins int
	if f.opt.View == ViewTimeToConvert {
		lo, width, bins = f.histBins(all.durs[0], gathered)
	}
	table := func(st *funnelStats) FunnelGroup {
		g := FunnelGroup{Key: st.key}
		switch f.opt.View {
		case ViewSteps:
			g.Steps = f.steps(st)
			g.Users = g.Steps[0].Users
		case ViewTrends:
			g.Buckets = make([]FunnelBucket, len(st.entered))
			for b := range st.entered {
				g.Buckets[b] = FunnelBucket{Entered: st.entered[b], Converted: st.converted[b]}
				g.Users += st.entered[b]
			}
		case ViewTimeToConvert:
			g.Hist = histogram(st.durs[0], lo, width, bins)
			g.Users = g.Hist.Users
		}
		return g
	}
	for _, st := range gathered {
		g := table(st)
		if f.opt.List != nil {
			g.List = &st.list
		}
		res.Groups = append(res.Groups, g)
	}
	if f.opt.Key.From == KeyNone && len(res.Groups) == 0 {
		empty := &funnelStats{}
		f.initStats(empty)
		res.Groups = append(res.Groups, table(empty))
	}
	var whole FunnelGroup
	if len(reps) == 1 && all == gathered[0] {
		whole = res.Groups[0]
		whole.Steps, whole.Buckets = slices.Clone(whole.Steps), slices.Clone(whole.Buckets)
		if h := whole.Hist; h != nil {
			c := *h
			c.Bins = slices.Clone(h.Bins)
			whole.Hist = &c
		}
	} else {
		whole = table(all)
	}
	res.Steps, res.Buckets, res.Hist = whole.Steps, whole.Buckets, whole.Hist
	if f.opt.List != nil {
		res.List = &all.list
	}
	return res
}

// histBins returns the time-to-convert bins over the users' durations d
// (µs): lo = ⌊min⌋ and hi = ⌈max⌉ in seconds, bins = the option or ⌈∛u⌉
// clamped to 1..60 (u = len(d)), width ⌈(hi − lo) / bins⌉ (60 when that
// is 0) — docs/analytics.md §11, PostHog's bins. The range also covers the rows'
// durations, which per-row attributions measure on other walks.
func (f *Funnel) histBins(d []int64, rows []*funnelStats) (lo, width int64, bins int) {
	bins = f.opt.Bins
	if bins == 0 {
		bins = min(max(int(math.Ceil(math.Cbrt(float64(len(d))))), 1), 60)
		// ⌈∛u⌉ exactly: correct the float root at perfect cubes.
		for bins > 1 && (bins-1)*(bins-1)*(bins-1) >= len(d) {
			bins--
		}
	}
	mn, mx, any := int64(math.MaxInt64), int64(math.MinInt64), false
	for _, l := range append([][]int64{d}, rowDurs(rows)...) {
		if len(l) > 0 {
			mn, mx, any = min(mn, slices.Min(l)), max(mx, slices.Max(l)), true
		}
	}
	if !any {
		return 0, 60, bins
	}
	// Times are never negative: the quotients are floors.
	lo = mn / 1e6
	hi := (mx + 1e6 - 1) / 1e6
	width = (hi - lo + int64(bins) - 1) / int64(bins)
	if width == 0 {
		width = 60
	}
	return lo, width, bins
}

func rowDurs(rows []*funnelStats) [][]int64 {
	out := make([][]int64, len(rows))
	for i, r := range rows {
		out[i] = r.durs[0]
	}
	return out
}

// binOf returns the bin of a duration d (µs) in bins starting at lo
// seconds, width seconds wide: the last bin takes the end too.
func binOf(d, lo, width int64, bins int) int {
	x := d - lo*1e6
	if x < 0 {
		return -1
	}
	return min(int(x/(width*1e6)), bins-1)
}

// histogram counts durations d (µs) into bins and computes their mean and
// exact median (QuantileSelect reorders d).
func histogram(d []int64, lo, width int64, bins int) *FunnelHist {
	h := &FunnelHist{Lo: lo, Width: width, Bins: make([]int64, bins), Users: int64(len(d))}
	for _, v := range d {
		h.Bins[binOf(v, lo, width, bins)]++
	}
	if len(d) > 0 {
		h.HasTime = true
		h.AvgSeconds = meanMicros(d) / 1e6
		h.MedianSeconds = QuantileSelect(d, 0.5) / 1e6
	}
	return h
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
