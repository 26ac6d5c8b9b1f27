package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spurdb/spur/query/analysis"
)

// FunnelResult is the result of a funnel query: the step table (view
// steps), the buckets of conversion over time (view trends) or the
// time-to-convert histogram (view time_to_convert), over all users and
// per breakdown value.
type FunnelResult struct {
	Kind      string        `json:"kind"`            // "funnel"
	View      string        `json:"view,omitempty"`  // trends | time_to_convert; omitted for steps
	Order     string        `json:"order,omitempty"` // strict | unordered; omitted for ordered
	Range     ResolvedRange `json:"range"`
	TZ        string        `json:"tz"`
	WindowSec int64         `json:"window_seconds"`
	// FromStep and ToStep are the trends and time-to-convert views' steps.
	FromStep int                 `json:"from_step,omitempty"`
	ToStep   int                 `json:"to_step,omitempty"`
	Steps    []FunnelStep        `json:"steps,omitempty"`
	Buckets  []FunnelTrendBucket `json:"buckets,omitempty"`
	*FunnelTimes
	Breakdown []FunnelBreakdown `json:"breakdown,omitempty"` // by users counted descending, "(other)" last
	List      *ListResult       `json:"list,omitempty"`      // the users behind one number, when asked
	Warnings  []Warning         `json:"warnings,omitempty"`  // notes on the query (docs/analytics.md §9): unknown events and values
	Stats     Stats             `json:"stats"`
}

// ResultKind returns "funnel".
func (r *FunnelResult) ResultKind() string { return "funnel" }

func (r *FunnelResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// FunnelStep is one step's row: users who reached at least this step,
// conversion from step 1 and from the previous step (fractions in [0, 1]),
// and the average and median time from the previous step in seconds over
// the users who reached this step (null for step 1). Label is the step's
// event name, or in an unordered funnel "1 step", "2 steps", … (Event is
// then null).
type FunnelStep struct {
	Step                   int      `json:"step"`
	Label                  string   `json:"label"`
	Event                  *string  `json:"event"`
	Users                  int64    `json:"users"`
	Conversion             float64  `json:"conversion"`
	ConversionFromPrevious float64  `json:"conversion_from_previous"`
	AvgSeconds             *float64 `json:"avg_seconds"`
	MedianSeconds          *float64 `json:"median_seconds"`
}

// FunnelTrendBucket is one bucket of conversion over time: users with an
// attempt entered in the bucket that reached from_step (Entered) and
// to_step (Converted), Converted/Entered (null when Entered is 0), and
// whether the bucket's end plus the window passes the end of the data or
// now (its users may still convert).
type FunnelTrendBucket struct {
	Start      string   `json:"start"`
	Entered    int64    `json:"entered"`
	Converted  int64    `json:"converted"`
	Conversion *float64 `json:"conversion"`
	Incomplete bool     `json:"incomplete"`
}

// FunnelTimes is the time-to-convert histogram: users per bin of seconds
// from from_step to to_step, the users counted and their mean and median
// (null when none).
type FunnelTimes struct {
	Histogram      []FunnelBin `json:"histogram"`
	Users          int64       `json:"users"`
	AverageSeconds *float64    `json:"average_seconds"`
	MedianSeconds  *float64    `json:"median_seconds"`
}

// FunnelBin is one histogram bin, [FromSeconds, ToSeconds) (the last bin
// also holds ToSeconds).
type FunnelBin struct {
	FromSeconds int64 `json:"from_seconds"`
	ToSeconds   int64 `json:"to_seconds"`
	Users       int64 `json:"users"`
}

// FunnelBreakdown is the funnel of one breakdown value, in the query's
// view.
type FunnelBreakdown struct {
	Value   string              `json:"value"`
	Steps   []FunnelStep        `json:"steps,omitempty"`
	Buckets []FunnelTrendBucket `json:"buckets,omitempty"`
	*FunnelTimes
}

// defaultWindow is the funnel conversion window when none is given (14 days).
const defaultWindow = "14d"

// funnelPlan is a validated funnel query: the kernel's spec and options,
// the breakdown and the view's buckets.
type funnelPlan struct {
	spec     analysis.FunnelSpec
	opt      analysis.FunnelOptions
	bd       *breakdown
	perRow   bool    // all_steps or step k: a user may be in several rows
	bounds   []int64 // trends buckets
	from, to int     // the view's steps
}

// funnel is a compiled funnel (docs/analytics.md §5, §11; PostHog's funnel UDF): in
// its order (ordered, strict, unordered) with its exclusions, the view's
// numbers (step table, conversion over time or time to convert) over all
// users and per breakdown value, and the users behind one number when the
// query has a list.
type funnel struct {
	e    *Engine
	p    *plan
	fp   *funnelPlan
	list *analysis.FunnelList
	opt  analysis.FunnelOptions // the options of the next pass
	acc  *analysis.Funnel       // the last pass's accumulator
}

func init() { register(kind{name: "funnel", order: 2, compile: compileFunnel}) }

// compileFunnel checks and compiles a funnel query.
func compileFunnel(ctx context.Context, e *Engine, p *plan) (compiled, error) {
	fp, err := p.planFunnel(ctx)
	if err != nil {
		return nil, err
	}
	list, err := p.funnelList(fp)
	if err != nil {
		return nil, err
	}
	f := &funnel{e: e, p: p, fp: fp, list: list, opt: fp.opt}
	if fp.opt.View != analysis.ViewTimeToConvert {
		f.opt.List = list
	}
	return f, nil
}

// passes runs the main pass.
func (f *funnel) passes(ctx context.Context) (err error) {
	f.acc, err = f.e.funnelScan(ctx, f.p, f.fp, f.opt)
	return err
}

// finalize ranks the breakdown values, runs the passes that need the
// ranking or the histogram, and renders the tables and the list.
func (f *funnel) finalize(ctx context.Context) (Result, error) {
	p, fp, q := f.p, f.fp, f.p.q
	merge := timer()
	res := &FunnelResult{Kind: "funnel", Range: p.resolvedRange(), TZ: p.loc.String(), WindowSec: fp.spec.Window / second}
	if fp.spec.Order != analysis.OrderOrdered {
		res.Order = fp.spec.Order.String()
	}
	if fp.opt.View != analysis.ViewSteps {
		res.View, res.FromStep, res.ToStep = fp.opt.View.String(), fp.from, fp.to
	}
	kr := f.acc.Result(nil)
	var r ranked
	if fp.bd != nil {
		// Rank the values by users counted; merge the rest.
		keys := make([]analysis.Key, len(kr.Groups))
		totals := make([]float64, len(kr.Groups))
		for i, g := range kr.Groups {
			keys[i], totals[i] = g.Key, float64(g.Users)
		}
		var err error
		if r, err = p.rank(ctx, fp.bd, keys, totals); err != nil {
			return nil, err
		}
	}
	kr, err := f.rescans(ctx, kr, &r, &merge)
	if err != nil {
		return nil, err
	}
	if fp.bd != nil && !fp.perRow {
		kr = f.acc.Result(r.group)
	}
	p.funnelTables(fp, kr.Steps, kr.Buckets, kr.Hist, &res.Steps, &res.Buckets, &res.FunnelTimes)
	if fp.bd != nil {
		res.Breakdown = f.breakdown(kr, &r)
	}
	if q.List != nil {
		l, err := p.pickList(fp.bd, kr.List, len(kr.Groups), func(i int) (analysis.Key, *analysis.UserList) {
			return kr.Groups[i].Key, kr.Groups[i].List
		})
		if err != nil {
			return nil, err
		}
		res.List = listResult(q.List, l, p.snap.Persons())
	}
	p.stats.MergeMS += merge()
	res.Stats = p.stats
	return res, nil
}

// rescans runs the passes that need the main pass's answer kr and
// returns the last one's: a merged "(other)" row of several values (under
// ranking r) is walked as one row, and the list of a bin needs the
// histogram's bins. merge is the merge timer, stopped during a pass.
func (f *funnel) rescans(ctx context.Context, kr analysis.FunnelResult, r *ranked, merge *func() float64) (analysis.FunnelResult, error) {
	p := f.p
	rescan := func() error {
		p.stats.MergeMS += (*merge)()
		var err error
		f.acc, err = f.e.funnelScan(ctx, p, f.fp, f.opt)
		*merge = timer()
		if err == nil {
			kr = f.acc.Result(nil)
		}
		return err
	}
	if f.fp.perRow && r.other {
		f.opt.Group = &analysis.KeyGroup{Kept: r.order, Other: otherKey}
		if err := rescan(); err != nil {
			return kr, err
		}
	}
	if f.fp.opt.View == analysis.ViewTimeToConvert && f.list != nil {
		if err := binListCheck(p.q.List, kr.Hist); err != nil {
			return kr, err
		}
		f.opt.List = binList(f.list, kr.Hist)
		if err := rescan(); err != nil {
			return kr, err
		}
	}
	return kr, nil
}

// breakdown renders the funnel of each kept value in rank order (r), then
// "(other)".
func (f *funnel) breakdown(kr analysis.FunnelResult, r *ranked) []FunnelBreakdown {
	p, fp := f.p, f.fp
	byKey := map[analysis.Key]analysis.FunnelGroup{}
	for _, g := range kr.Groups {
		byKey[g.Key] = g
	}
	order := r.order
	if r.other {
		order = append(order, otherKey)
	}
	var out []FunnelBreakdown
	for _, k := range order {
		g := byKey[k]
		b := FunnelBreakdown{Value: p.label(fp.bd, k)}
		if g.Steps == nil && g.Buckets == nil && g.Hist == nil {
			g = emptyGroup(fp, kr)
		}
		p.funnelTables(fp, g.Steps, g.Buckets, g.Hist, &b.Steps, &b.Buckets, &b.FunnelTimes)
		out = append(out, b)
	}
	return out
}

// emptyGroup returns the tables of a breakdown value without users.
func emptyGroup(fp *funnelPlan, kr analysis.FunnelResult) analysis.FunnelGroup {
	var g analysis.FunnelGroup
	switch fp.opt.View {
	case analysis.ViewSteps:
		g.Steps = make([]analysis.FunnelStepResult, fp.spec.Steps)
		for k := range g.Steps {
			g.Steps[k].Step = k + 1
		}
	case analysis.ViewTrends:
		g.Buckets = make([]analysis.FunnelBucket, len(fp.bounds)-1)
	case analysis.ViewTimeToConvert:
		g.Hist = &analysis.FunnelHist{Lo: kr.Hist.Lo, Width: kr.Hist.Width, Bins: make([]int64, len(kr.Hist.Bins))}
	}
	return g
}

// binList completes a time-to-convert list with the histogram's bins.
func binList(l *analysis.FunnelList, h *analysis.FunnelHist) *analysis.FunnelList {
	c := *l
	c.Bins, c.BinLo, c.BinWidth = len(h.Bins), h.Lo, h.Width
	return &c
}

// funnelScan runs one scan of the funnel with options opt and returns the
// merged accumulator.
func (e *Engine) funnelScan(ctx context.Context, p *plan, fp *funnelPlan, opt analysis.FunnelOptions) (*analysis.Funnel, error) {
	// Later steps may fall up to W after the range (window inclusive).
	return scanMerge(ctx, e, p, span{from: p.from, to: p.to + fp.spec.Window + 1},
		func(int) (*analysis.Funnel, error) { return analysis.NewFunnel(fp.spec, opt) }, mergeOf[*analysis.Funnel])
}

// planFunnel validates a funnel query: steps, window, order, exclusions,
// view and breakdown, giving the steps mask bits 0..n-1, then the
// exclusions, then (strict order) the matcher of every event.
func (p *plan) planFunnel(ctx context.Context) (*funnelPlan, error) {
	q := p.q
	n := len(q.Steps)
	if n < 2 || n > analysis.MaxFunnelSteps {
		return nil, invalid("steps", "a funnel needs 2 to %d steps, found %d", analysis.MaxFunnelSteps, n)
	}
	win := q.Window
	if win == "" {
		win = defaultWindow
	}
	w, err := ParseDuration(win)
	if err != nil {
		return nil, invalid("window", "want a duration such as \"90s\", \"30m\", \"12h\", \"7d\", \"2w\", \"3mo\" or \"1y\", found %q", win)
	}
	if w > analysis.MaxFunnelWindow {
		return nil, invalid("window", "window %s is longer than 100 years", win)
	}
	fp := &funnelPlan{spec: analysis.FunnelSpec{Steps: n, Window: w, From: p.from, To: p.to}}
	if fp.spec.Order, err = analysis.ParseFunnelOrder(q.Order); err != nil {
		return nil, invalid("order", "unknown order %q: want ordered, strict or unordered", q.Order)
	}
	if fp.opt.View, err = analysis.ParseFunnelView(q.View); err != nil {
		return nil, invalid("view", "unknown view %q: want steps, trends or time_to_convert", q.View)
	}
	for i, s := range q.Steps {
		if _, err := p.addMatcher(s, fieldIdx("steps", i), true); err != nil {
			return nil, err
		}
	}
	for i, x := range q.Exclusions {
		f := fieldIdx("exclusions", i)
		from, to := x.FromStep, x.ToStep
		if from == 0 {
			from = 1
		}
		if to == 0 {
			to = n
		}
		if from < 1 || from >= to || to > n {
			return nil, invalid(f, "from_step %d and to_step %d: want 1 ≤ from_step < to_step ≤ %d", from, to, n)
		}
		if fp.spec.Order == analysis.OrderUnordered && (from != 1 || to != n) {
			return nil, invalid(f, "an unordered funnel takes exclusions over the whole funnel only (from_step 1, to_step %d)", n)
		}
		for k := from; k <= to; k++ {
			if s := q.Steps[k-1]; s.Event == x.Event && sameFilters(s.Where, x.Where) {
				return nil, invalid(f, "the exclusion matches the same events as step %d (%q), which it lies between", k, x.Event)
			}
		}
		bit, err := p.addMatcher(Matcher{Event: x.Event, Where: x.Where}, f, true)
		if err != nil {
			return nil, err
		}
		fp.spec.Exclusions = append(fp.spec.Exclusions, analysis.FunnelExclusion{Bit: bit, From: from, To: to})
	}
	if fp.spec.Order == analysis.OrderStrict {
		// Every event passing the global filters takes part.
		bit, err := p.addMatcher(Matcher{Event: AnyEvent}, "order", true)
		if err != nil {
			return nil, err
		}
		fp.spec.Events = 1 << uint(bit)
	}
	if fp.opt.View != analysis.ViewSteps {
		fp.from, fp.to = q.FromStep, q.ToStep
		if fp.from == 0 {
			fp.from = 1
		}
		if fp.to == 0 {
			fp.to = n
		}
		if fp.from < 1 || fp.from >= fp.to || fp.to > n {
			return nil, invalid("from_step", "from_step %d and to_step %d: want 1 ≤ from_step < to_step ≤ %d", fp.from, fp.to, n)
		}
		fp.opt.FromStep, fp.opt.ToStep = fp.from, fp.to
	} else if q.FromStep != 0 || q.ToStep != 0 {
		return nil, invalid("from_step", "from_step and to_step belong to the trends and time_to_convert views")
	}
	if q.Bins != 0 && fp.opt.View != analysis.ViewTimeToConvert {
		return nil, invalid("bins", "bins belongs to the time_to_convert view")
	}
	if q.Bins < 0 || q.Bins > analysis.MaxFunnelBins {
		return nil, invalid("bins", "want 1 to %d bins, found %d", analysis.MaxFunnelBins, q.Bins)
	}
	fp.opt.Bins = q.Bins
	if fp.opt.View == analysis.ViewTrends {
		if _, _, fp.bounds, err = p.calendarBounds(ctx, "day"); err != nil {
			return nil, err
		}
		fp.opt.Bounds = fp.bounds
	} else if q.Interval != "" {
		return nil, invalid("interval", "a funnel takes an interval in the trends view only")
	}
	if fp.bd, err = p.parseBreakdown(); err != nil {
		return nil, err
	}
	if fp.bd != nil {
		fp.opt.Key = fp.bd.src
		if err := p.parseAttribution(fp); err != nil {
			return nil, err
		}
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	return fp, nil
}

// parseAttribution reads breakdown.attribution: "entry", "first_touch",
// "last_touch", "all_steps" or {"step": k}.
func (p *plan) parseAttribution(fp *funnelPlan) error {
	raw := bytes.TrimSpace(p.q.Breakdown.Attribution)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	const field = "breakdown.attribution"
	if fp.bd.src.From != analysis.KeyEvent {
		return invalid(field, "attribution applies to event-property breakdowns; a user property has one value per user")
	}
	var name string
	if raw[0] == '{' {
		var st struct {
			Step *int `json:"step"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&st); err != nil || st.Step == nil {
			return invalid(field, "want \"entry\", \"first_touch\", \"last_touch\", \"all_steps\" or {\"step\": k}, found %s", raw)
		}
		n := fp.spec.Steps
		if *st.Step < 1 || *st.Step > n {
			return invalid(field, "step %d: want a step from 1 to %d", *st.Step, n)
		}
		if fp.spec.Order == analysis.OrderUnordered && *st.Step != 1 {
			return invalid(field, "an unordered funnel attributes to step 1 only, not step %d", *st.Step)
		}
		fp.opt.Attribution, fp.opt.AttrStep = analysis.AttrStep, *st.Step
	} else {
		if err := json.Unmarshal(raw, &name); err != nil {
			return invalid(field, "want \"entry\", \"first_touch\", \"last_touch\", \"all_steps\" or {\"step\": k}, found %s", raw)
		}
		a, err := analysis.ParseFunnelAttribution(name)
		if err != nil || a == analysis.AttrStep {
			return invalid(field, "unknown attribution %q: want entry, first_touch, last_touch, all_steps or {\"step\": k}", name)
		}
		fp.opt.Attribution = a
	}
	fp.perRow = fp.opt.Attribution == analysis.AttrAllSteps || fp.opt.Attribution == analysis.AttrStep
	return nil
}

// funnelList validates the query's list for the funnel's view.
func (p *plan) funnelList(fp *funnelPlan) (*analysis.FunnelList, error) {
	l := p.q.List
	if l == nil {
		return nil, nil
	}
	if l.CohortStart != "" || l.Period != 0 {
		return nil, invalid("list", "a funnel list takes step and dropped, bucket and status, or bin; not cohort_start or period")
	}
	keep, err := listKeep(l)
	if err != nil {
		return nil, err
	}
	n := fp.spec.Steps
	fl := &analysis.FunnelList{Keep: keep}
	switch fp.opt.View {
	case analysis.ViewSteps:
		if l.Bucket != "" || l.Status != "" || l.Bin != nil {
			return nil, invalid("list", "a funnel's steps view lists a step (step, dropped)")
		}
		if l.Step < 1 || l.Step > n {
			return nil, invalid("list.step", "want a step from 1 to %d, found %d", n, l.Step)
		}
		fl.Step, fl.Dropped = l.Step, l.Dropped
	case analysis.ViewTrends:
		if l.Step != 0 || l.Dropped || l.Bin != nil {
			return nil, invalid("list", "conversion over time lists a bucket's users (bucket, status)")
		}
		nb := len(fp.bounds) - 1
		t, ok := parseInstant(l.Bucket, p.loc)
		if !ok || t < fp.bounds[0] || t >= fp.bounds[nb] {
			return nil, invalid("list.bucket", "want the date or instant of a bucket in the range (%s to %s), found %q",
				formatTime(fp.bounds[0], p.loc), formatTime(fp.bounds[nb], p.loc), l.Bucket)
		}
		for fp.bounds[fl.Bucket+1] <= t {
			fl.Bucket++
		}
		switch l.Status {
		case "entered":
		case "converted":
			fl.Converted = true
		default:
			return nil, invalid("list.status", "want \"entered\" or \"converted\", found %q", l.Status)
		}
	case analysis.ViewTimeToConvert:
		if l.Step != 0 || l.Dropped || l.Bucket != "" || l.Status != "" || l.Bin == nil {
			return nil, invalid("list", "time to convert lists a bin's users (bin)")
		}
		if *l.Bin < 0 || *l.Bin >= analysis.MaxFunnelBins {
			return nil, invalid("list.bin", "want a bin from 0, found %d", *l.Bin)
		}
		fl.Bin = *l.Bin
	}
	return fl, nil
}

// binListCheck reports a bin beyond the histogram.
func binListCheck(l *List, h *analysis.FunnelHist) error {
	if l != nil && l.Bin != nil && *l.Bin >= len(h.Bins) {
		return invalid("list.bin", "want a bin from 0 to %d, found %d", len(h.Bins)-1, *l.Bin)
	}
	return nil
}

// funnelTables renders the kernel's tables of one group in the view.
func (p *plan) funnelTables(fp *funnelPlan, steps []analysis.FunnelStepResult, buckets []analysis.FunnelBucket, hist *analysis.FunnelHist,
	outSteps *[]FunnelStep, outBuckets *[]FunnelTrendBucket, outTimes **FunnelTimes) {
	switch fp.opt.View {
	case analysis.ViewSteps:
		*outSteps = funnelSteps(steps, p.q.Steps, fp.spec.Order == analysis.OrderUnordered)
	case analysis.ViewTrends:
		out := make([]FunnelTrendBucket, len(buckets))
		for b, bk := range buckets {
			out[b] = FunnelTrendBucket{Start: formatTime(fp.bounds[b], p.loc), Entered: bk.Entered, Converted: bk.Converted,
				Incomplete: p.incomplete(fp.bounds[b+1] + fp.spec.Window)}
			if bk.Entered > 0 {
				out[b].Conversion = ptr(float64(bk.Converted) / float64(bk.Entered))
			}
		}
		*outBuckets = out
	case analysis.ViewTimeToConvert:
		t := &FunnelTimes{Users: hist.Users, Histogram: make([]FunnelBin, len(hist.Bins))}
		for i, c := range hist.Bins {
			t.Histogram[i] = FunnelBin{FromSeconds: hist.Lo + int64(i)*hist.Width, ToSeconds: hist.Lo + int64(i+1)*hist.Width, Users: c}
		}
		if hist.HasTime {
			t.AverageSeconds, t.MedianSeconds = ptr(hist.AvgSeconds), ptr(hist.MedianSeconds)
		}
		*outTimes = t
	}
}

func funnelSteps(kr []analysis.FunnelStepResult, steps []Matcher, unordered bool) []FunnelStep {
	out := make([]FunnelStep, len(kr))
	for i, s := range kr {
		out[i] = FunnelStep{Step: s.Step, Users: s.Users, Conversion: s.Conversion, ConversionFromPrevious: s.ConversionFromPrevious}
		if unordered {
			out[i].Label = fmt.Sprintf("%d steps", s.Step)
			if s.Step == 1 {
				out[i].Label = "1 step"
			}
		} else {
			out[i].Label, out[i].Event = steps[i].Event, ptr(steps[i].Event)
		}
		if s.HasTime {
			out[i].AvgSeconds, out[i].MedianSeconds = ptr(s.AvgSeconds), ptr(s.MedianSeconds)
		}
	}
	return out
}

// timer returns a function that reports the milliseconds since timer was called.
func timer() func() float64 {
	t0 := time.Now()
	return func() float64 { return ms(time.Since(t0)) }
}

// writeTable prints the funnel's view for all users, then per breakdown
// value, then the listed users.
func (r *FunnelResult) writeTable(w io.Writer) {
	head := fmt.Sprintf("funnel %s .. %s (%s), window %s", r.Range.From, r.Range.To, r.TZ, dur(ptr(float64(r.WindowSec))))
	switch r.Order {
	case "strict":
		head += ", strict order"
	case "unordered":
		head += ", any order"
	}
	switch r.View {
	case "trends":
		head += fmt.Sprintf(", conversion from step %d to %d by step-1 time; * = incomplete", r.FromStep, r.ToStep)
	case "time_to_convert":
		head += fmt.Sprintf(", time from step %d to %d", r.FromStep, r.ToStep)
	}
	fmt.Fprintln(w, head)
	view := func(steps []FunnelStep, buckets []FunnelTrendBucket, ft *FunnelTimes) {
		switch {
		case buckets != nil:
			writeFunnelBuckets(w, buckets)
		case ft != nil:
			writeHistogram(w, ft)
		default:
			writeSteps(w, steps)
		}
	}
	view(r.Steps, r.Buckets, r.FunnelTimes)
	for _, b := range r.Breakdown {
		fmt.Fprintf(w, "breakdown %s\n", b.Value)
		view(b.Steps, b.Buckets, b.FunnelTimes)
	}
	if l := r.List; l != nil {
		var what string
		switch {
		case l.Bin != nil:
			what = fmt.Sprintf("users of bin %d", *l.Bin)
		case l.Status != "":
			what = fmt.Sprintf("users %s in bucket %s", l.Status, label(l.Bucket))
		case l.Dropped:
			what = fmt.Sprintf("users who dropped off after step %d", l.Step)
		default:
			what = fmt.Sprintf("users who reached step %d", l.Step)
		}
		writeList(w, what, l)
	}
}

func writeFunnelBuckets(w io.Writer, buckets []FunnelTrendBucket) {
	fmt.Fprintln(w, "bucket\tentered\tconverted\tconversion\t")
	for _, b := range buckets {
		mark, conv := "", "-"
		if b.Incomplete {
			mark = "*"
		}
		if b.Conversion != nil {
			conv = pct(*b.Conversion)
		}
		fmt.Fprintf(w, "%s%s\t%d\t%d\t%s\t\n", label(b.Start), mark, b.Entered, b.Converted, conv)
	}
}

func writeHistogram(w io.Writer, ft *FunnelTimes) {
	fmt.Fprintln(w, "bin\tfrom (s)\tto (s)\tfrom\tto\tusers\t")
	for i, b := range ft.Histogram {
		end := ")"
		if i == len(ft.Histogram)-1 {
			end = "]"
		}
		fmt.Fprintf(w, "%d\t[%d\t%d%s\t%s\t%s\t%d\t\n", i, b.FromSeconds, b.ToSeconds, end,
			dur(ptr(float64(b.FromSeconds))), dur(ptr(float64(b.ToSeconds))), b.Users)
	}
	fmt.Fprintf(w, "users %d, average %s, median %s\n", ft.Users, dur(ft.AverageSeconds), dur(ft.MedianSeconds))
}

func writeSteps(w io.Writer, steps []FunnelStep) {
	fmt.Fprintln(w, "step\tevent\tusers\tconversion\tfrom previous\tavg time\tmedian time\t")
	for _, s := range steps {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t\n", s.Step, s.Label, s.Users, pct(s.Conversion),
			pct(s.ConversionFromPrevious), dur(s.AvgSeconds), dur(s.MedianSeconds))
	}
}

// CSV columns of the funnel result's views: steps, trends and
// time_to_convert (WriteCSV; docs/queries.md).
var (
	funnelCSV       = []string{"breakdown_value", "step", "label", "event", "users", "conversion", "conversion_from_previous", "avg_seconds", "median_seconds"}
	funnelTrendsCSV = []string{"breakdown_value", "bucket", "entered", "converted", "conversion", "incomplete"}
	funnelTimesCSV  = []string{"breakdown_value", "from_seconds", "to_seconds", "users"}
)

// writeCSV writes one row per step, bucket or histogram bin (by view),
// for all users then per breakdown value.
func (r *FunnelResult) writeCSV(cw *csv.Writer) {
	switch {
	case r.FunnelTimes != nil:
		cw.Write(funnelTimesCSV)
		bins := func(bv string, t *FunnelTimes) {
			if t == nil {
				return
			}
			for _, b := range t.Histogram {
				cw.Write([]string{bv, inum(b.FromSeconds), inum(b.ToSeconds), inum(b.Users)})
			}
		}
		bins("", r.FunnelTimes)
		for _, b := range r.Breakdown {
			bins(b.Value, b.FunnelTimes)
		}
	case r.View == "trends":
		cw.Write(funnelTrendsCSV)
		buckets := func(bv string, bs []FunnelTrendBucket) {
			for _, b := range bs {
				cw.Write([]string{bv, b.Start, inum(b.Entered), inum(b.Converted), fnump(b.Conversion), strconv.FormatBool(b.Incomplete)})
			}
		}
		buckets("", r.Buckets)
		for _, b := range r.Breakdown {
			buckets(b.Value, b.Buckets)
		}
	default:
		cw.Write(funnelCSV)
		steps := func(bv string, steps []FunnelStep) {
			for _, s := range steps {
				cw.Write([]string{bv, strconv.Itoa(s.Step), s.Label, strp(s.Event), inum(s.Users), fnum(s.Conversion),
					fnum(s.ConversionFromPrevious), fnump(s.AvgSeconds), fnump(s.MedianSeconds)})
			}
		}
		steps("", r.Steps)
		for _, b := range r.Breakdown {
			steps(b.Value, b.Steps)
		}
	}
}
