package testutil

import (
	"math"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
)

// FunnelQuery is a funnel for the naive references (docs/analytics.md §5, §11): step
// k is matcher Steps[k-1] (see Match) with filters Where[k-1]
// (optional).
type FunnelQuery struct {
	Steps  []string
	Where  [][]Filter
	Window int64 // µs, inclusive
	From   int64 // step 1 only in [From, To), UTC µs
	To     int64
	// Order is "" or "ordered", "strict" or "unordered".
	Order      string
	Exclusions []Exclusion
	// View is "" or "steps", "trends" or "time_to_convert"; FromStep and
	// ToStep (0: 1 and n) are the view's steps, Bounds the trends
	// buckets.
	View             string
	FromStep, ToStep int
	Bounds           []int64
	// Attribution of an event-property breakdown: "" or "entry",
	// "first_touch", "last_touch", "all_steps", "step" (with AttrStep).
	Attribution string
	AttrStep    int
	// Relabel, if not nil, maps each value of a per-row attribution
	// (all_steps, step) before rows are formed (a merged "(other)" row is
	// one funnel over its values).
	Relabel func(string) string
	Common
}

// Exclusion is a funnel exclusion (docs/analytics.md §11): events matching Event and
// Where exclude attempts whose furthest step is in [From, To).
type Exclusion struct {
	Event    string
	Where    []Filter
	From, To int
}

// NaiveOutcome is one outcome of NaiveFunnelOutcomes: the user's
// breakdown row (rendered; "" without a breakdown), the bucket of the
// trends view (else 0), the furthest step, the counted attempt's step
// times (unordered: the counted window's sorted first times per step) and
// the position in the input slice of its first event.
type NaiveOutcome struct {
	Row    string
	Bucket int
	Step   int
	Times  []int64
	First  int
}

// NaivePath is one user's outcome in NaiveFunnel.
type NaivePath struct {
	Step  int     // furthest step reached
	Times []int64 // step times of the counted attempt
	First int     // position in the input slice of the counted attempt's step-1 event
}

// NaiveFunnel computes an ordered funnel's step table (the steps view of
// NaiveFunnelOutcomes, without rows). It returns the step table over the
// admitted users and every admitted user's outcome (users with step 0
// included).
func NaiveFunnel(d Data, q FunnelQuery) (analysis.FunnelResult, map[string]NaivePath) {
	q.Breakdown, q.View, q.Attribution = nil, "", ""
	paths := map[string]NaivePath{}
	for u, outs := range NaiveFunnelOutcomes(d, q) {
		p := NaivePath{}
		if len(outs) > 0 {
			p = NaivePath{Step: outs[0].Step, Times: outs[0].Times, First: outs[0].First}
		}
		paths[u] = p
	}
	return analysis.FunnelResult{Steps: FunnelTable(paths, len(q.Steps))}, paths
}

// NaiveFunnelOutcomes runs the funnel of docs/analytics.md §5 and §11 over every
// admitted user's events, following the spec's words with an explicit
// list of attempts (or of windows), and returns each admitted user's
// outcomes: one per breakdown row the user is in (steps and time to
// convert), or per row and bucket (trends). Users without an outcome
// (no step 1 in range, or left out by an exclusion) map to nil.
func NaiveFunnelOutcomes(d Data, q FunnelQuery) map[string][]NaiveOutcome {
	users := CurrentUsers(d.Users)
	admit := q.admitted(d)
	out := map[string][]NaiveOutcome{}
	for _, pos := range byUser(d.Events) {
		u := d.Events[pos[0]].User
		if admit(u) {
			out[u] = q.userOutcomes(d.Events, pos, users[u])
		}
	}
	return out
}

// userOutcomes computes one user's outcomes; pos lists the user's events
// in trail order.
func (q *FunnelQuery) userOutcomes(evs []Ev, pos []int, props map[string]event.Value) []NaiveOutcome {
	n := len(q.Steps)
	value := func(i int) string {
		v := Render(evs[i].Props[q.Breakdown.Prop], q.loc())
		if q.Relabel != nil && (q.Attribution == "all_steps" || q.Attribution == "step") {
			v = q.Relabel(v)
		}
		return v
	}
	stepEvent := func(i int) bool {
		for k := 1; k <= n; k++ {
			if q.matches(evs, i, props, k, nil) {
				return true
			}
		}
		return false
	}
	var out []NaiveOutcome
	switch q.Attribution {
	case "all_steps":
		// One funnel per value of the step events, on the events with it.
		var values []string
		for _, i := range pos {
			if stepEvent(i) && !slices.Contains(values, value(i)) {
				values = append(values, value(i))
			}
		}
		for _, v := range values {
			var sub []int
			for _, i := range pos {
				if value(i) == v {
					sub = append(sub, i)
				}
			}
			for _, o := range q.walk(evs, sub, props, nil) {
				o.Row = v
				out = append(out, o)
			}
		}
		return out
	case "step":
		k := q.AttrStep
		var values []string
		for _, i := range pos {
			if q.matches(evs, i, props, k, nil) && (k > 1 || q.Order == "unordered" || q.inRange(evs[i].Time)) && !slices.Contains(values, value(i)) {
				values = append(values, value(i))
			}
		}
		for _, v := range values {
			only := func(i int) bool { return value(i) == v }
			for _, o := range q.walk(evs, pos, props, only) {
				o.Row = v
				out = append(out, o)
			}
		}
		return out
	}
	out = q.walk(evs, pos, props, nil)
	for x := range out {
		o := &out[x]
		switch {
		case q.Breakdown == nil:
		case q.Breakdown.User:
			o.Row = Render(props[q.Breakdown.Prop], q.loc())
		case q.Attribution == "first_touch" || q.Attribution == "last_touch":
			// The first (last) event in [From, To+W] matching some step
			// with the property set.
			o.Row = "(none)"
			for _, i := range pos {
				e := evs[i]
				if e.Time >= q.From && e.Time-q.To <= q.Window && stepEvent(i) && e.Props[q.Breakdown.Prop].Type != event.TypeNone {
					o.Row = value(i)
					if q.Attribution == "first_touch" {
						break
					}
				}
			}
		default:
			o.Row = value(o.First)
		}
	}
	return out
}

func (q *FunnelQuery) inRange(t int64) bool { return t >= q.From && t < q.To }

// matches reports whether event i matches step k (1-based); only, if not
// nil, further restricts step AttrStep to the events it accepts.
func (q *FunnelQuery) matches(evs []Ev, i int, props map[string]event.Value, k int, only func(int) bool) bool {
	var where []Filter
	if k-1 < len(q.Where) {
		where = q.Where[k-1]
	}
	if !q.matcher(q.Steps[k-1], where).Matches(evs[i], props) {
		return false
	}
	return only == nil || k != q.AttrStep || only(i)
}

// bucket returns the trends bucket of t (0 in the other views).
func (q *FunnelQuery) bucket(t int64) int {
	if q.View != "trends" {
		return 0
	}
	for b := 0; b+1 < len(q.Bounds); b++ {
		if t >= q.Bounds[b] && t < q.Bounds[b+1] {
			return b
		}
	}
	return -1
}

// walk runs the funnel over the events at positions pos (trail order).
func (q *FunnelQuery) walk(evs []Ev, pos []int, props map[string]event.Value, only func(int) bool) []NaiveOutcome {
	n := len(q.Steps)
	stepsOf := func(i int, ranged bool) uint64 {
		var s uint64
		for k := 1; k <= n; k++ {
			if q.matches(evs, i, props, k, only) && (k > 1 || !ranged || q.inRange(evs[i].Time)) {
				s |= 1 << uint(k-1)
			}
		}
		return s
	}
	exclOf := func(i int) []int {
		var xs []int
		for x, ex := range q.Exclusions {
			if q.matcher(ex.Event, ex.Where).Matches(evs[i], props) {
				xs = append(xs, x)
			}
		}
		return xs
	}
	if q.Order == "unordered" {
		return q.walkUnordered(evs, pos, func(i int) uint64 { return stepsOf(i, false) }, exclOf)
	}
	global := Matcher{Event: Any, Where: q.Global}
	relevant := func(i int) bool {
		return stepsOf(i, false) != 0 || len(exclOf(i)) > 0 || (q.Order == "strict" && global.Matches(evs[i], props))
	}
	return q.walkOrdered(evs, pos, relevant, func(i int) uint64 { return stepsOf(i, true) }, exclOf)
}

type naiveAttempt struct {
	entry  int64
	times  []int64 // times[k-1]: when step k was reached
	events []int   // positions in the input slice of the step events
	bucket int
	excl   bool // excluded (docs/analytics.md §11)
	dead   bool // ended (strict order)
}

// walkOrdered is docs/analytics.md §5 with §11's strict order, exclusions and
// conversion over time, word by word.
func (q *FunnelQuery) walkOrdered(evs []Ev, pos []int, relevant func(int) bool, stepsOf func(int) uint64, exclOf func(int) []int) []NaiveOutcome {
	n := len(q.Steps)
	strict := q.Order == "strict"
	every := q.View == "trends"
	var attempts []*naiveAttempt
	type reach struct {
		a *naiveAttempt
		k int
	}
	var log []reach // every step reached, in order
	process := func(i, k int, mixed bool) {
		t := evs[i].Time
		if k == 1 {
			for _, a := range attempts {
				if a.entry == t {
					return // an attempt entered at this instant already exists
				}
			}
			a := &naiveAttempt{entry: t, times: []int64{t}, events: []int{i}, bucket: q.bucket(t)}
			attempts = append(attempts, a)
			log = append(log, reach{a, 1})
			return
		}
		if every {
			// Every live attempt that reached step k-1 within W advances.
			for _, a := range attempts {
				if !a.dead && !a.excl && len(a.times) == k-1 && t-a.entry <= q.Window && !(mixed && slices.Contains(a.events, i)) {
					a.times = append(a.times, t)
					a.events = append(a.events, i)
					log = append(log, reach{a, k})
				}
			}
			return
		}
		// The live attempt with the latest entry time among those at step k-1.
		var chosen *naiveAttempt
		for _, a := range attempts {
			if !a.dead && len(a.times) >= k-1 && (chosen == nil || a.entry > chosen.entry) {
				chosen = a
			}
		}
		if chosen == nil || t-chosen.entry > q.Window || (mixed && slices.Contains(chosen.events, i)) || chosen.excl {
			return
		}
		for _, a := range attempts {
			if !a.dead && len(a.times) >= k && a.entry >= chosen.entry {
				return // an attempt with the same or a later entry is already at step k
			}
		}
		chosen.times = append(chosen.times, t)
		chosen.events = append(chosen.events, i)
		log = append(log, reach{chosen, k})
	}
	end := func(s uint64) { // strict: attempts whose furthest step the event does not match end
		for _, a := range attempts {
			if s&(1<<uint(len(a.times)-1)) == 0 {
				a.dead = true
			}
		}
	}
	for x := 0; x < len(pos); {
		y := x
		for y < len(pos) && evs[pos[y]].Time == evs[pos[x]].Time {
			y++
		}
		var group []int
		for _, i := range pos[x:y] {
			if relevant(i) {
				group = append(group, i)
			}
		}
		x = y
		if len(group) == 0 {
			continue
		}
		t := evs[group[0]].Time
		hasStep := false
		for _, i := range group {
			hasStep = hasStep || stepsOf(i) != 0
		}
		if !hasStep {
			for _, i := range group {
				for _, xi := range exclOf(i) {
					ex := q.Exclusions[xi]
					for _, a := range attempts {
						if j := len(a.times); j >= ex.From && j < ex.To && t-a.entry <= q.Window {
							a.excl = true
						}
					}
				}
				if strict {
					end(0)
				}
			}
			continue
		}
		// Exclusion events at the time of a step event are ignored.
		same := true
		var first uint64
		seen := false
		for _, i := range group {
			s := stepsOf(i)
			if s == 0 && !strict {
				continue
			}
			if !seen {
				first, seen = s, true
			} else if s != first {
				same = false
			}
		}
		if same {
			for _, i := range group {
				s := stepsOf(i)
				for k := n; k >= 1; k-- {
					if s&(1<<uint(k-1)) != 0 {
						process(i, k, false)
					}
				}
				if strict {
					end(s)
				}
			}
		} else {
			for k := 1; k <= n; k++ {
				for _, i := range group {
					if stepsOf(i)&(1<<uint(k-1)) != 0 {
						process(i, k, true)
					}
				}
			}
		}
	}
	// Per bucket (one in the steps view): the furthest step m, and the
	// first attempt to reach m that is not excluded; none: left out.
	var out []NaiveOutcome
	for b := 0; b < max(1, len(q.Bounds)-1); b++ {
		m := 0
		for _, r := range log {
			if r.a.bucket == b {
				m = max(m, r.k)
			}
		}
		for _, r := range log {
			if r.a.bucket == b && r.k == m && !r.a.excl {
				out = append(out, NaiveOutcome{Bucket: b, Step: m, Times: slices.Clone(r.a.times[:m]), First: r.a.events[0]})
				break
			}
		}
	}
	return out
}

// walkUnordered is docs/analytics.md §11's unordered funnel: a window [t, t+W] at each
// step event in [From, To), valued by a maximum matching of its events to
// steps (after an exclusion: n if all n steps came before it, else 0).
func (q *FunnelQuery) walkUnordered(evs []Ev, pos []int, stepsOf func(int) uint64, exclOf func(int) []int) []NaiveOutcome {
	n := len(q.Steps)
	var steps []int // the step events
	var excls []int64
	for x := 0; x < len(pos); {
		y := x
		for y < len(pos) && evs[pos[y]].Time == evs[pos[x]].Time {
			y++
		}
		step, excl := false, false
		for _, i := range pos[x:y] {
			if stepsOf(i) != 0 {
				step = true
				steps = append(steps, i)
			}
			excl = excl || len(exclOf(i)) > 0
		}
		if excl && !step { // an exclusion at the time of a step event is ignored
			excls = append(excls, evs[pos[x]].Time)
		}
		x = y
	}
	type best struct {
		o  NaiveOutcome
		ok bool
	}
	var bests []best
	for si, i := range steps {
		t := evs[i].Time
		if !q.inRange(t) || (si > 0 && evs[steps[si-1]].Time == t) {
			continue
		}
		end := t + q.Window
		for _, x := range excls {
			if x > t && x <= end {
				end = x - 1 // the window's events before the exclusion
				break
			}
		}
		var content []int
		for _, c := range steps[si:] {
			if evs[c].Time <= end {
				content = append(content, c)
			}
		}
		masks := make([]uint64, len(content))
		for c, e := range content {
			masks[c] = stepsOf(e)
		}
		val := naiveMatching(masks, n)
		if end < t+q.Window && val < n {
			val = 0
		}
		b := q.bucket(t)
		for len(bests) <= b {
			bests = append(bests, best{})
		}
		if val == 0 || (bests[b].ok && bests[b].o.Step >= val) {
			continue
		}
		var times []int64
		for k := 0; k < n; k++ {
			for c, e := range content {
				if masks[c]&(1<<uint(k)) != 0 {
					times = append(times, evs[e].Time)
					break
				}
			}
		}
		slices.Sort(times)
		bests[b] = best{o: NaiveOutcome{Bucket: b, Step: val, Times: times[:val], First: i}, ok: true}
	}
	var out []NaiveOutcome
	for _, b := range bests {
		if b.ok {
			out = append(out, b.o)
		}
	}
	return out
}

// naiveMatching returns the size of a maximum matching of events (by
// mask) to steps, one step per event, by augmenting paths over the events.
func naiveMatching(masks []uint64, n int) int {
	owner := make([]int, n) // step → event + 1
	var try func(e int, seen []bool) bool
	try = func(e int, seen []bool) bool {
		for k := range n {
			if masks[e]&(1<<uint(k)) != 0 && !seen[k] {
				seen[k] = true
				if owner[k] == 0 || try(owner[k]-1, seen) {
					owner[k] = e + 1
					return true
				}
			}
		}
		return false
	}
	size := 0
	for e := range masks {
		if try(e, make([]bool, n)) {
			size++
		}
	}
	return size
}

// FunnelTable computes the step table of docs/analytics.md §5 from users' outcomes.
func FunnelTable(paths map[string]NaivePath, n int) []analysis.FunnelStepResult {
	var steps []analysis.FunnelStepResult
	for k := 1; k <= n; k++ {
		r := analysis.FunnelStepResult{Step: k}
		var durs []int64
		for _, p := range paths {
			if p.Step >= k {
				r.Users++
				if k >= 2 {
					durs = append(durs, p.Times[k-1]-p.Times[k-2])
				}
			}
		}
		if len(durs) > 0 {
			r.HasTime = true
			r.AvgSeconds = naiveMean(durs) / 1e6
			r.MedianSeconds = naiveMedian(durs) / 1e6
		}
		steps = append(steps, r)
	}
	for k := range steps {
		r := &steps[k]
		if steps[0].Users > 0 {
			r.Conversion = float64(r.Users) / float64(steps[0].Users)
		}
		r.ConversionFromPrevious = r.Conversion
		if k > 0 && steps[k-1].Users > 0 {
			r.ConversionFromPrevious = float64(r.Users) / float64(steps[k-1].Users)
		}
	}
	return steps
}

func naiveMean(d []int64) float64 {
	var sum int64
	for _, v := range d {
		sum += v
	}
	return float64(sum) / float64(len(d))
}

// naiveMedian sorts d and returns its median (docs/analytics.md §4 interpolation).
func naiveMedian(d []int64) float64 {
	slices.Sort(d)
	h := float64(len(d)-1) * 0.5
	lo := int(h)
	v := float64(d[lo])
	if h > float64(lo) {
		v += (h - float64(lo)) * (float64(d[lo+1]) - v)
	}
	return v
}

// FunnelGroup is one breakdown value of a naive funnel: its step table
// and its users' outcomes.
type FunnelGroup struct {
	Value string
	Steps []analysis.FunnelStepResult
	Paths map[string]NaivePath
}

// NaiveFunnelBreakdown groups the outcomes of NaiveFunnel by breakdown
// value (the counted attempt's step-1 event's property, or the user's),
// ranked by users at step 1 descending, then value, with "(other)" last.
func NaiveFunnelBreakdown(d Data, q FunnelQuery, paths map[string]NaivePath) []FunnelGroup {
	users := CurrentUsers(d.Users)
	byLabel := map[string]map[string]NaivePath{}
	labels := map[string]string{}
	for u, p := range paths {
		if p.Step == 0 {
			continue
		}
		l := q.label(d.Events[p.First], users)
		labels[u] = l
		if byLabel[l] == nil {
			byLabel[l] = map[string]NaivePath{}
		}
		byLabel[l][u] = p
	}
	totals := map[string]float64{}
	for l, ps := range byLabel {
		totals[l] = float64(len(ps))
	}
	kept, other := rankLabels(totals, q.Breakdown.Limit)
	var out []FunnelGroup
	for _, l := range kept {
		out = append(out, FunnelGroup{Value: l, Steps: FunnelTable(byLabel[l], len(q.Steps)), Paths: byLabel[l]})
	}
	if other {
		rest := map[string]NaivePath{}
		for u, l := range labels {
			if !slices.Contains(kept, l) {
				rest[u] = paths[u]
			}
		}
		out = append(out, FunnelGroup{Value: Other, Steps: FunnelTable(rest, len(q.Steps)), Paths: rest})
	}
	return out
}

// FunnelUsers returns, sorted, the users of paths who reached at least
// step k, or with dropped those whose furthest step is exactly k.
func FunnelUsers(paths map[string]NaivePath, k int, dropped bool) []string {
	var out []string
	for u, p := range paths {
		if p.Step == k || (!dropped && p.Step > k) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// FunnelRowPaths groups outcomes (steps and time-to-convert views) by row:
// row → user → path.
func FunnelRowPaths(outs map[string][]NaiveOutcome) map[string]map[string]NaivePath {
	rows := map[string]map[string]NaivePath{}
	for u, os := range outs {
		for _, o := range os {
			if rows[o.Row] == nil {
				rows[o.Row] = map[string]NaivePath{}
			}
			rows[o.Row][u] = NaivePath{Step: o.Step, Times: o.Times, First: o.First}
		}
	}
	return rows
}

// FunnelTrendRow is one row of a naive conversion-over-time view: per
// bucket the users entered (reached from) and converted (reached to).
type FunnelTrendRow struct {
	Entered, Converted [][]string // sorted user ids per bucket
}

// FunnelTrends tabulates trends-view outcomes per row over nb buckets.
func FunnelTrends(outs map[string][]NaiveOutcome, nb, from, to int) map[string]FunnelTrendRow {
	rows := map[string]FunnelTrendRow{}
	for u, os := range outs {
		for _, o := range os {
			r, ok := rows[o.Row]
			if !ok {
				r = FunnelTrendRow{Entered: make([][]string, nb), Converted: make([][]string, nb)}
			}
			if o.Step >= from {
				r.Entered[o.Bucket] = append(r.Entered[o.Bucket], u)
			}
			if o.Step >= to {
				r.Converted[o.Bucket] = append(r.Converted[o.Bucket], u)
			}
			rows[o.Row] = r
		}
	}
	for _, r := range rows {
		for b := range nb {
			slices.Sort(r.Entered[b])
			slices.Sort(r.Converted[b])
		}
	}
	return rows
}

// FunnelHistogram is docs/analytics.md §11's time-to-convert histogram in naive form:
// Bins[i] holds the users whose time (seconds) lies in [Lo + i·Width,
// Lo + (i+1)·Width), the last bin also its end.
type FunnelHistogram struct {
	Lo, Width int64
	Bins      [][]string
	Seconds   []float64 // every user's time
}

// NaiveHistogram computes the bins of the users all (user → µs) with
// bins bins (0: ⌈∛u⌉ clamped to 1..60, u = len(all)) over the range of
// all and of the durations extra (the rows' of a per-row attribution),
// and places the users of row.
func NaiveHistogram(all map[string]int64, extra []int64, bins int, row map[string]int64) FunnelHistogram {
	u := len(all)
	if bins == 0 {
		bins = int(math.Ceil(math.Cbrt(float64(u))))
		for bins*bins*bins < u {
			bins++
		}
		for bins > 1 && (bins-1)*(bins-1)*(bins-1) >= u {
			bins--
		}
		bins = min(max(bins, 1), 60)
	}
	h := FunnelHistogram{Width: 60, Bins: make([][]string, bins)}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, d := range all {
		lo, hi = math.Min(lo, float64(d)/1e6), math.Max(hi, float64(d)/1e6)
	}
	for _, d := range extra {
		lo, hi = math.Min(lo, float64(d)/1e6), math.Max(hi, float64(d)/1e6)
	}
	if math.IsInf(lo, 1) {
		return h
	}
	h.Lo = int64(math.Floor(lo))
	w := int64(math.Ceil((math.Ceil(hi) - math.Floor(lo)) / float64(bins)))
	if w > 0 {
		h.Width = w
	}
	var users []string
	for id := range row {
		users = append(users, id)
	}
	slices.Sort(users)
	for _, id := range users {
		s := float64(row[id]) / 1e6
		for i := range bins {
			from, to := float64(h.Lo+int64(i)*h.Width), float64(h.Lo+int64(i+1)*h.Width)
			if (s >= from && s < to) || (i == bins-1 && s == to) {
				h.Bins[i] = append(h.Bins[i], id)
				h.Seconds = append(h.Seconds, s)
				break
			}
		}
	}
	return h
}

// NaiveFunnelRows runs NaiveFunnelOutcomes and applies the breakdown's
// limit: rows ranked by the users they count (steps view: users at step
// 1; trends: users entered summed over the buckets; time to convert:
// users reaching the to step), then by value; the rest merged into
// "(other)" — for per-row attributions by walking the merged values as
// one row. It returns the rows in result order and the outcomes with
// their final rows.
func NaiveFunnelRows(d Data, q FunnelQuery) ([]string, map[string][]NaiveOutcome) {
	outs := NaiveFunnelOutcomes(d, q)
	if q.Breakdown == nil {
		return nil, outs
	}
	to := q.ToStep
	if to == 0 {
		to = len(q.Steps)
	}
	from := q.FromStep
	if from == 0 {
		from = 1
	}
	totals := map[string]float64{}
	for _, os := range outs {
		for _, o := range os {
			switch q.View {
			case "trends":
				if o.Step >= from {
					totals[o.Row]++
				} else {
					totals[o.Row] += 0
				}
			case "time_to_convert":
				if o.Step >= to {
					totals[o.Row]++
				} else {
					totals[o.Row] += 0
				}
			default:
				totals[o.Row]++
			}
		}
	}
	kept, other := rankLabels(totals, q.Breakdown.Limit)
	if !other {
		return kept, outs
	}
	isKept := map[string]bool{}
	for _, l := range kept {
		isKept[l] = true
	}
	relabel := func(v string) string {
		if isKept[v] {
			return v
		}
		return Other
	}
	if q.Attribution == "all_steps" || q.Attribution == "step" {
		q.Relabel = relabel
		outs = NaiveFunnelOutcomes(d, q)
	} else {
		for u, os := range outs {
			for i := range os {
				os[i].Row = relabel(os[i].Row)
			}
			outs[u] = os
		}
	}
	return append(kept, Other), outs
}

// FunnelDurations returns, per user of outs whose outcome (in row, or any
// row when anyRow) reaches step to, the time from step from to step to
// (µs): the time-to-convert view's values.
func FunnelDurations(outs map[string][]NaiveOutcome, from, to int, row string, anyRow bool) map[string]int64 {
	m := map[string]int64{}
	for u, os := range outs {
		for _, o := range os {
			if (anyRow || o.Row == row) && o.Step >= to {
				m[u] = o.Times[to-1] - o.Times[from-1]
			}
		}
	}
	return m
}
