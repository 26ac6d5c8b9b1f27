package analysis

import (
	"fmt"
	"math"
	"slices"

	"github.com/spurdb/spur/trail"
)

// AttributionModel is how the credit of one conversion is shared among its
// eligible touchpoints (docs/analytics.md §10).
type AttributionModel uint8

// Attribution models. The zero value is the default, last_touch
// (Airbridge's default).
const (
	LastTouch     AttributionModel = iota // the latest touchpoint of the highest-priority matcher with any
	FirstTouch                            // the earliest touchpoint of any matcher
	Linear                                // 1/n each
	PositionBased                         // 0.4 first, 0.4 last, 0.2 shared by the others
	TimeDecay                             // weight 2^(−age/half-life), normalised
)

var modelNames = []string{"last_touch", "first_touch", "linear", "position_based", "time_decay"}

// String returns the query-language name of m.
func (m AttributionModel) String() string { return enumString(modelNames, uint8(m), "model") }

// ParseAttributionModel parses a model name; "" is the default last_touch.
// Other input returns an error listing the accepted names.
func ParseAttributionModel(s string) (AttributionModel, error) {
	v, err := enumParse(modelNames, s, "attribution model", true)
	return AttributionModel(v), err
}

// MaxTouchpoints bounds the touchpoint matchers of an attribution.
const MaxTouchpoints = 16

// Unattributed is the channel key of credit that no eligible touchpoint
// earned: an unset value with Bits 2 (unset values read from trails have
// Bits 0), rendered "(unattributed)".
var Unattributed = Key{Bits: 2}

// Touchpoint is one touchpoint matcher: its mask bit and lookback (µs ≥ 0,
// boundary included).
type Touchpoint struct {
	Bit      int
	Lookback int64
}

// ValueCol is an optional numeric trail column credited through a model:
// Col < 0 for none; Float says it holds float64 bits rather than int64.
type ValueCol struct {
	Col   int
	Float bool
}

// AttributionSpec is a validated query-time attribution for the kernel
// (docs/analytics.md §10).
type AttributionSpec struct {
	// From, To (UTC µs): conversions and subsequent events are counted in
	// [From, To). The trail must reach back far enough for the
	// touchpoints (From − lookback) and for the conversions subsequent
	// events inherit from (From − SubsequentWindow − lookback); with
	// First, to the user's first conversion.
	From, To int64
	// Conversion is the conversion matcher's mask bit.
	Conversion int
	// Touchpoints are the touchpoint matchers in priority order, highest
	// first (1..MaxTouchpoints).
	Touchpoints []Touchpoint
	// Channel is the trail column credited (the touchpoint's value).
	Channel int
	Model   AttributionModel
	// HalfLife (µs > 0) is time_decay's half-life.
	HalfLife int64
	// First counts only each user's first conversion (in the trail, which
	// must then hold all stored data before To).
	First bool
	// Value is the conversion's value column (credited share × value).
	Value ValueCol
	// Subsequent is the mask bit of the subsequent matcher, -1 for none;
	// a subsequent event inherits the shares of the user's latest
	// conversion at most SubsequentWindow (µs) before it. SubsequentValue
	// is its value column.
	Subsequent       int
	SubsequentWindow int64
	SubsequentValue  ValueCol
	// Bounds, if not nil, are calendar boundaries covering [From, To):
	// conversions are bucketed by their time, subsequent events by theirs.
	Bounds []int64
	// Breakdown is where a key comes from: the counted event's column
	// (the conversion's, or the subsequent event's own), the user's
	// property, or none.
	Breakdown KeySource
	// Group, if set, gives the key each breakdown key is counted under,
	// or drops it from the rows (totals still count it; see KeyGroup).
	Group *KeyGroup
	// List, if not nil, selects users to list.
	List *AttributionList
	// ChannelDict, if set, names the string values among the channel
	// keys (as Breakdown.Dict does the breakdown's) for encoded states;
	// read only to encode and decode.
	ChannelDict KeyDict
}

// AttributionList selects the users with a positive conversion share in
// channel Channel under group key Key (the zero Key without a breakdown).
// Keep is the number of ids kept.
type AttributionList struct {
	Channel Key
	Key     Key
	Keep    int
}

// AttributionCell is the credit of one channel (× key × bucket):
// Conversions the sum of the conversions' shares, Users the users with a
// positive conversion share, Value Σ share × value, SubEvents and
// SubValue the same for subsequent events. Each user's shares are summed
// in float64 in trail order, the users' sums exactly (rounded once), so
// the result is the same for any split of the users.
type AttributionCell struct {
	Conversions, Value, SubEvents, SubValue float64
	Users                                   int64
}

// AttributionRow is the credit of one channel value under one breakdown
// key: over the range and per bucket (nil without Bounds).
type AttributionRow struct {
	Channel Key
	Key     Key
	Total   AttributionCell
	Buckets []AttributionCell
}

// AttributionResult is the result of an Attribution: rows ordered by key,
// then channel (compareKeys), and the plain totals: conversions counted,
// users with one, their value, subsequent events and their value.
type AttributionResult struct {
	Rows        []AttributionRow
	Conversions int64
	Users       int64
	Value       float64
	SubEvents   int64
	SubValue    float64
	List        *UserList // the listed users (nil without a list); points into the accumulator
}

// attrCell is the mergeable state of one AttributionCell: exact sums
// over users.
type attrCell struct {
	conv, value, subEv, subVal ExactSum
	users                      int64
}

// attrMark is the current user's scratch in one cell: their float sums
// (pend: conversions, value, subsequent events, subsequent value), added
// in trail order and flushed into the cell's exact sums when the user
// ends, so the result does not depend on how users are split or merged.
type attrMark struct {
	gen  uint32 // user generation that last counted users
	pgen uint32 // user generation of pend
	pend [4]float64
}

// cellRef locates a cell: row r of group g, its total (b = -1) or bucket
// b.
type cellRef struct{ g, r, b int32 }

type attrRow struct {
	channel Key
	total   attrCell
	buckets []attrCell
}

type attrGroup struct {
	channels slotTable // channel key → row
	rows     []attrRow
}

// touch is a touchpoint in the user's recent history (kept in trail
// order).
type touch struct {
	t    int64
	prio int32 // index of its matcher in Touchpoints
	ch   Key
}

// chShare is a channel's share of one conversion.
type chShare struct {
	ch    Key
	share float64
}

// attrState is the mergeable state of an Attribution: what Merge combines
// and AppendBinary writes (the marks and the current user's history are
// scratch).
type attrState struct {
	groups             keyGroups
	gs                 []attrGroup
	list               UserList
	conv, users, subEv int64
	value, subVal      ExactSum
}

// Attribution accumulates attributed conversions per channel, breakdown
// key and bucket. Create it with NewAttribution; it is owned by one
// goroutine. Add takes a user's trail in one or more chunks (package
// trail); between chunks it keeps the touchpoints within the longest
// lookback of the last conversion (counted in Bytes) and the shares of
// the latest conversion.
type Attribution struct {
	spec      AttributionSpec
	nb        int
	touchMask uint64
	convMask  uint64
	subMask   uint64
	maxLook   int64
	idx       bucketIndex
	attrState
	bytes int64

	marks           [][]attrMark // per group, per row r: [r*(nb+1) + b+1] (b = -1: the total)
	uValue, uSubVal float64      // the current user's value sums (trail order)
	touched         []cellRef    // cells with a pending sum of the current user

	// current user
	gen      uint32
	ug       int32
	listed   bool
	hadConv  bool
	counted  bool // the user was counted in users
	touches  []touch
	head     int // touches[head:] are live
	lastOK   bool
	lastT    int64
	last     []chShare // shares of the latest conversion
	lastRows []int32   // rows of last's channels in group lastG (-1: not resolved)
	lastG    int32
	shares   []chShare // scratch
	weights  []float64 // scratch
	eligible []int32   // scratch: indexes into touches
}

// NewAttribution validates spec and returns an empty accumulator. It
// copies the slices of spec. Errors: empty range, no or too many
// touchpoints, bits out of range, negative lookbacks or window, a
// time_decay without a positive half-life, an unknown model, boundaries
// not increasing or not covering [From, To), a list keeping too many ids.
func NewAttribution(spec AttributionSpec) (*Attribution, error) {
	if spec.From >= spec.To {
		return nil, fmt.Errorf("analysis: attribution: empty range [%d, %d)", spec.From, spec.To)
	}
	if n := len(spec.Touchpoints); n == 0 || n > MaxTouchpoints {
		return nil, fmt.Errorf("analysis: attribution: %d touchpoints, want 1 to %d", n, MaxTouchpoints)
	}
	if spec.Conversion < 0 || spec.Conversion > 63 || spec.Subsequent < -1 || spec.Subsequent > 63 {
		return nil, fmt.Errorf("analysis: attribution: bits %d, %d out of range", spec.Conversion, spec.Subsequent)
	}
	if spec.Model > TimeDecay {
		return nil, fmt.Errorf("analysis: attribution: unknown model %d", spec.Model)
	}
	if spec.Model == TimeDecay && spec.HalfLife <= 0 {
		return nil, fmt.Errorf("analysis: attribution: half-life %dµs, want > 0", spec.HalfLife)
	}
	if spec.SubsequentWindow < 0 {
		return nil, fmt.Errorf("analysis: attribution: subsequent window %dµs, want ≥ 0", spec.SubsequentWindow)
	}
	a := &Attribution{convMask: 1 << spec.Conversion}
	for i, tp := range spec.Touchpoints {
		if tp.Bit < 0 || tp.Bit > 63 || tp.Lookback < 0 {
			return nil, fmt.Errorf("analysis: attribution: touchpoint %d: bit %d or lookback %dµs out of range", i, tp.Bit, tp.Lookback)
		}
		a.touchMask |= 1 << tp.Bit
		a.maxLook = max(a.maxLook, tp.Lookback)
	}
	if spec.Subsequent >= 0 {
		a.subMask = 1 << spec.Subsequent
	}
	if spec.Bounds != nil {
		if err := checkBounds("attribution", spec.Bounds, spec.From, spec.To); err != nil {
			return nil, err
		}
		a.nb = len(spec.Bounds) - 1
		spec.Bounds = slices.Clone(spec.Bounds)
		a.idx = newBucketIndex(spec.Bounds)
	}
	if l := spec.List; l != nil && (l.Keep < 0 || l.Keep > MaxListKeep) {
		return nil, fmt.Errorf("analysis: attribution: list keeps %d ids", l.Keep)
	}
	spec.Touchpoints = slices.Clone(spec.Touchpoints)
	a.spec = spec
	a.groups.group = newKeyGrouper(spec.Group)
	if spec.List != nil {
		a.list.Keep = spec.List.Keep
	}
	return a, nil
}

// group returns the group of raw key k (-1: dropped), creating its state.
func (a *Attribution) group(k Key) int32 {
	g := a.groups.of(k)
	if g >= 0 {
		a.ensure(g)
	}
	return g
}

func (a *Attribution) ensure(g int32) {
	if int(g) == len(a.gs) {
		a.gs = append(a.gs, attrGroup{})
		a.marks = append(a.marks, nil)
		a.bytes += 64
	}
}

// row returns the index of the row of channel ch in group g, creating
// it.
func (a *Attribution) row(g int32, ch Key) int32 {
	gr := &a.gs[g]
	r, ok := gr.channels.get(ch)
	if !ok {
		r = int32(len(gr.rows))
		before := gr.channels.bytes()
		gr.rows = append(gr.rows, attrRow{channel: ch})
		if a.nb > 0 {
			gr.rows[r].buckets = make([]attrCell, a.nb)
		}
		gr.channels.put(ch, r)
		a.marks[g] = append(a.marks[g], make([]attrMark, a.nb+1)...)
		a.bytes += int64(a.nb+1)*attrCellSize + 16 + gr.channels.bytes() - before
	}
	return r
}

// attrCellSize is the size of an attrCell without its digits.
const attrCellSize = 4*40 + 16 + 8 + 32

// Add accumulates one chunk of a user's trail (package trail). The chunk
// is borrowed only for the call. Cost: O(events) plus, per conversion,
// O(touchpoints within the longest lookback); no allocation except new
// rows, the growth of the exact sums and of the touchpoint history.
func (a *Attribution) Add(tr *trail.Trail) {
	sp := &a.spec
	if !sp.Breakdown.check(tr) || sp.Channel >= len(tr.Cols) || sp.Value.Col >= len(tr.Cols) || sp.SubsequentValue.Col >= len(tr.Cols) {
		panic("analysis: Attribution.Add: trail lacks a column")
	}
	if tr.Offset == 0 {
		a.beginUser(tr)
	}
	times := tr.Times
	masks := tr.Mask[:len(times)]
	all := a.touchMask | a.convMask | a.subMask
	for i := 0; i < len(times); {
		t := times[i]
		if t >= sp.To {
			break
		}
		j := i + 1
		for j < len(times) && times[j] == t {
			j++
		}
		// A tie group: its touchpoints count for its conversions (by time
		// alone), its conversions for its subsequent events.
		var or uint64
		for k := i; k < j; k++ {
			m := masks[k]
			or |= m
			if m&a.touchMask != 0 && m&a.convMask == 0 {
				a.push(tr, k, m)
			}
		}
		if or&all == 0 {
			i = j
			continue
		}
		if or&a.convMask != 0 {
			for k := i; k < j; k++ {
				if masks[k]&a.convMask != 0 && !(sp.First && a.hadConv) {
					a.hadConv = true
					a.convert(tr, k, t)
				}
			}
		}
		if or&a.subMask != 0 && t >= sp.From {
			for k := i; k < j; k++ {
				if masks[k]&a.subMask != 0 {
					a.subsequent(tr, k, t)
				}
			}
		}
		i = j
	}
	if !tr.More {
		a.touches, a.head = a.touches[:0], 0
		a.flush()
	}
}

// flush adds the current user's float sums to the exact sums.
func (a *Attribution) flush() {
	for _, ref := range a.touched {
		c, m := a.cellAt(ref), a.markAt(ref)
		for k, s := range [4]*ExactSum{&c.conv, &c.value, &c.subEv, &c.subVal} {
			if m.pend[k] != 0 {
				a.addExact(s, m.pend[k])
			}
		}
		m.pend = [4]float64{}
	}
	a.touched = a.touched[:0]
	a.addExact(&a.value, a.uValue)
	a.addExact(&a.subVal, a.uSubVal)
	a.uValue, a.uSubVal = 0, 0
}

// cellAt returns the cell ref points to.
func (a *Attribution) cellAt(ref cellRef) *attrCell {
	r := &a.gs[ref.g].rows[ref.r]
	if ref.b < 0 {
		return &r.total
	}
	return &r.buckets[ref.b]
}

// markAt returns the current user's mark of the cell ref points to.
func (a *Attribution) markAt(ref cellRef) *attrMark {
	return &a.marks[ref.g][int(ref.r)*(a.nb+1)+int(ref.b)+1]
}

// beginUser resets the per-user state.
func (a *Attribution) beginUser(tr *trail.Trail) {
	a.gen++
	if a.gen == 0 { // wrapped: reset every cell's generation
		for _, m := range a.marks {
			clear(m)
		}
		a.gen = 1
	}
	a.listed, a.hadConv, a.counted, a.lastOK = false, false, false, false
	a.touches, a.head = a.touches[:0], 0
	a.ug = 0
	if a.spec.Breakdown.From != KeyEvent {
		a.ug = a.group(a.spec.Breakdown.user(tr))
	}
}

// push appends touchpoint event k (mask m) to the user's history.
func (a *Attribution) push(tr *trail.Trail, k int, m uint64) {
	prio := int32(0)
	for p, tp := range a.spec.Touchpoints {
		if m&(1<<tp.Bit) != 0 {
			prio = int32(p)
			break
		}
	}
	c := &tr.Cols[a.spec.Channel]
	t := tr.Times[k]
	a.evict(t)                                    // a later conversion cannot use what this one could not
	if a.head > 0 && a.head >= len(a.touches)/2 { // compact the consumed front
		n := copy(a.touches, a.touches[a.head:])
		a.touches, a.head = a.touches[:n], 0
	}
	before := cap(a.touches)
	a.touches = append(a.touches, touch{t: t, prio: prio, ch: Key{Bits: c.Bits[k], Set: c.Set[k]}})
	a.bytes += int64(cap(a.touches)-before) * 32
}

// evict drops the touchpoints older than the longest lookback before t:
// no conversion at t or later can use them.
func (a *Attribution) evict(t int64) {
	for a.head < len(a.touches) && a.touches[a.head].t < t-a.maxLook {
		a.head++
	}
}

// shareOut computes the shares of a conversion at t into a.shares (by
// channel, each channel once) from the eligible touchpoints.
func (a *Attribution) shareOut(t int64) {
	sp := &a.spec
	a.evict(t)
	el := a.eligible[:0]
	best := int32(-1) // last_touch: the winner; first_touch: the first
	for i := a.head; i < len(a.touches); i++ {
		tp := &a.touches[i]
		if t-tp.t > sp.Touchpoints[tp.prio].Lookback {
			continue
		}
		el = append(el, int32(i))
		if sp.Model == LastTouch && (best < 0 || tp.prio <= a.touches[best].prio) {
			best = int32(i) // later in trail order wins ties of priority
		}
	}
	a.eligible = el
	sh := a.shares[:0]
	n := len(el)
	switch {
	case n == 0:
		sh = append(sh, chShare{ch: Unattributed, share: 1})
	case sp.Model == LastTouch:
		sh = append(sh, chShare{ch: a.touches[best].ch, share: 1})
	case sp.Model == FirstTouch:
		sh = append(sh, chShare{ch: a.touches[el[0]].ch, share: 1})
	case sp.Model == Linear:
		for _, i := range el {
			sh = append(sh, chShare{ch: a.touches[i].ch, share: 1 / float64(n)})
		}
	case sp.Model == PositionBased:
		for k, i := range el {
			sh = append(sh, chShare{ch: a.touches[i].ch, share: positionShare(k, n)})
		}
	default: // time decay, relative to the latest touchpoint (no underflow of the largest weight)
		w := a.weights[:0]
		latest := a.touches[el[n-1]].t
		var sum float64
		for _, i := range el {
			x := math.Exp2(float64(a.touches[i].t-latest) / float64(sp.HalfLife))
			w = append(w, x)
			sum += x
		}
		for k, i := range el {
			sh = append(sh, chShare{ch: a.touches[i].ch, share: w[k] / sum})
		}
		a.weights = w
	}
	// One share per channel: sum each channel's shares in trail order.
	slices.SortStableFunc(sh, func(x, y chShare) int { return compareKeys(x.ch, y.ch) })
	out := sh[:0]
	for _, s := range sh {
		if len(out) > 0 && out[len(out)-1].ch == s.ch {
			out[len(out)-1].share += s.share
		} else {
			out = append(out, s)
		}
	}
	a.shares = out
}

// positionShare is position_based's share of the k-th (0-based) of n
// touchpoints.
func positionShare(k, n int) float64 {
	switch {
	case n == 1:
		return 1
	case n == 2:
		return 0.5
	case k == 0 || k == n-1:
		return 0.4
	}
	return 0.2 / float64(n-2)
}

// convert attributes the conversion event k at t: its shares become the
// latest conversion's, and it is counted when t is in [From, To).
func (a *Attribution) convert(tr *trail.Trail, k int, t int64) {
	a.shareOut(t)
	a.last = append(a.last[:0], a.shares...)
	a.lastOK, a.lastT, a.lastG = true, t, -1
	sp := &a.spec
	if t < sp.From {
		return
	}
	v := colValue(tr, sp.Value, k)
	a.conv++
	a.uValue += v
	if !a.counted {
		a.counted = true
		a.users++
	}
	g := a.keyGroup(tr, k)
	if g < 0 {
		return
	}
	b := -1
	if a.nb > 0 {
		b = a.idx.of(t)
	}
	for _, s := range a.shares {
		ri := a.row(g, s.ch)
		a.credit(cellRef{g, ri, -1}, s.share, v, false)
		if b >= 0 {
			a.credit(cellRef{g, ri, int32(b)}, s.share, v, false)
		}
		if l := sp.List; l != nil && !a.listed && s.share > 0 && s.ch == l.Channel && a.groups.keys[g] == l.Key {
			a.list.Add(tr.ID)
			a.listed = true
		}
	}
}

// subsequent credits subsequent event k at s ≥ From through the shares of
// the latest conversion within the window, or to Unattributed.
func (a *Attribution) subsequent(tr *trail.Trail, k int, s int64) {
	sp := &a.spec
	v := colValue(tr, sp.SubsequentValue, k)
	a.subEv++
	a.uSubVal += v
	g := a.keyGroup(tr, k)
	if g < 0 {
		return
	}
	shares, inherit := a.last, true
	if !a.lastOK || s-a.lastT > sp.SubsequentWindow {
		inherit = false
		a.shares = append(a.shares[:0], chShare{ch: Unattributed, share: 1})
		shares = a.shares
	} else if a.lastG != g { // the rows of the conversion's channels, once per group
		a.lastRows = a.lastRows[:0]
		for _, sh := range shares {
			a.lastRows = append(a.lastRows, a.row(g, sh.ch))
		}
		a.lastG = g
	}
	b := -1
	if a.nb > 0 {
		b = a.idx.of(s)
	}
	for k, sh := range shares {
		var ri int32
		if inherit {
			ri = a.lastRows[k]
		} else {
			ri = a.row(g, sh.ch)
		}
		a.credit(cellRef{g, ri, -1}, sh.share, v, true)
		if b >= 0 {
			a.credit(cellRef{g, ri, int32(b)}, sh.share, v, true)
		}
	}
}

// keyGroup returns the group of counted event k (-1: dropped).
func (a *Attribution) keyGroup(tr *trail.Trail, k int) int32 {
	if a.spec.Breakdown.From == KeyEvent {
		return a.group(a.spec.Breakdown.event(tr, k))
	}
	return a.ug
}

// credit adds a share of a conversion (sub false) or subsequent event
// with value v to the current user's sums of cell ref.
func (a *Attribution) credit(ref cellRef, share, v float64, sub bool) {
	m := a.markAt(ref)
	if m.pgen != a.gen {
		m.pgen = a.gen
		a.touched = append(a.touched, ref)
	}
	if sub {
		m.pend[2] += share
		m.pend[3] += share * v
		return
	}
	m.pend[0] += share
	m.pend[1] += share * v
	if share > 0 && m.gen != a.gen {
		m.gen = a.gen
		a.cellAt(ref).users++
	}
}

// addExact adds f to s, accounting the growth of its digits.
func (a *Attribution) addExact(s *ExactSum, f float64) {
	before := cap(s.d)
	s.AddFloat(f)
	a.bytes += int64(cap(s.d)-before) * 8
}

// colValue returns value column vc of event k as a float64 (0 when unset
// or without a column).
func colValue(tr *trail.Trail, vc ValueCol, k int) float64 {
	if vc.Col < 0 {
		return 0
	}
	c := &tr.Cols[vc.Col]
	if !c.Set[k] {
		return 0
	}
	return colFloat(c.Bits[k], vc.Float)
}

// Merge adds the state of o, created from an equal spec (or decoded with
// DecodeAttribution), into a. o is not modified (value-wise). A spec that
// differs is an error wrapping ErrState, and a is left unchanged.
func (a *Attribution) Merge(o *Attribution) error {
	if err := a.sameSpec(o); err != nil {
		return err
	}
	for og, k := range o.groups.keys {
		g := a.groups.add(k)
		a.ensure(g)
		for ri := range o.gs[og].rows {
			or := &o.gs[og].rows[ri]
			r := &a.gs[g].rows[a.row(g, or.channel)]
			a.mergeCell(&r.total, &or.total)
			for b := range or.buckets {
				a.mergeCell(&r.buckets[b], &or.buckets[b])
			}
		}
	}
	a.conv += o.conv
	a.users += o.users
	a.subEv += o.subEv
	a.mergeExact(&a.value, &o.value)
	a.mergeExact(&a.subVal, &o.subVal)
	return a.list.Merge(&o.list)
}

func (a *Attribution) mergeCell(c, o *attrCell) {
	a.mergeExact(&c.conv, &o.conv)
	a.mergeExact(&c.value, &o.value)
	a.mergeExact(&c.subEv, &o.subEv)
	a.mergeExact(&c.subVal, &o.subVal)
	c.users += o.users
}

func (a *Attribution) mergeExact(s, o *ExactSum) {
	before := cap(s.d)
	s.Merge(o)
	a.bytes += int64(cap(s.d)-before) * 8
}

// Bytes returns the memory the accumulator holds (rows, exact sums, the
// user's touchpoint history and scratch, listed ids), for the query's
// budget.
func (a *Attribution) Bytes() int64 {
	return a.bytes + a.groups.bytes() + a.list.Bytes() +
		int64(cap(a.last)+cap(a.shares))*24 + int64(cap(a.weights))*8 + int64(cap(a.eligible)+cap(a.lastRows))*4 + int64(cap(a.touched))*12
}

// Result returns the rows and totals in newly allocated slices owned by
// the caller; a stays usable.
func (a *Attribution) Result() AttributionResult {
	res := AttributionResult{Conversions: a.conv, Users: a.users, SubEvents: a.subEv,
		Value: a.value.Float64(), SubValue: a.subVal.Float64()}
	for _, g := range a.groups.sorted() {
		gr := &a.gs[g]
		order := make([]int, len(gr.rows))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(x, y int) int { return compareKeys(gr.rows[x].channel, gr.rows[y].channel) })
		for _, ri := range order {
			r := &gr.rows[ri]
			row := AttributionRow{Channel: r.channel, Key: a.groups.keys[g], Total: r.total.result()}
			if a.nb > 0 {
				row.Buckets = make([]AttributionCell, a.nb)
				for b := range r.buckets {
					row.Buckets[b] = r.buckets[b].result()
				}
			}
			res.Rows = append(res.Rows, row)
		}
	}
	if a.spec.List != nil {
		res.List = &a.list
	}
	return res
}

func (c *attrCell) result() AttributionCell {
	return AttributionCell{Conversions: c.conv.Float64(), Value: c.value.Float64(), SubEvents: c.subEv.Float64(),
		SubValue: c.subVal.Float64(), Users: c.users}
}
