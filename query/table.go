package query

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints a result as a readable text table (the CLI's --table):
// trends as one row per bucket and one column per series (and breakdown
// value), funnels as one row per step (then per breakdown value),
// retention as one row per cohort (and breakdown value) with "rate%
// (count)" per period, cohorts as their size; then a listed page of user
// ids. Incomplete buckets and cells are marked with '*'. The result's
// warnings come first, one "warning: field: message" line each.
func WriteTable(w io.Writer, res any) error {
	if ws := WarningsOf(res); ws != nil {
		for _, wn := range *ws {
			if wn.Field != "" {
				fmt.Fprintf(w, "warning: %s: %s\n", wn.Field, wn.Message)
			} else {
				fmt.Fprintf(w, "warning: %s\n", wn.Message)
			}
		}
	}
	r, ok := res.(Result)
	if !ok {
		return fmt.Errorf("no table form for %T", res)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	r.writeTable(tw)
	return tw.Flush()
}

// writeTable prints the cohort's size and page of user ids.
func (r *CohortResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "cohort (range %s .. %s, %s): %d users\n", r.Range.From, r.Range.To, r.TZ, r.Users)
	writeIDs(w, r.UserIDs, r.Offset, r.Users)
}

func label(start string) string {
	if t, err := time.Parse(time.RFC3339Nano, start); err == nil {
		if t.Hour() == 0 && t.Minute() == 0 && t.Second() == 0 {
			return t.Format("2006-01-02")
		}
		return t.Format("2006-01-02 15:04")
	}
	return start
}

func num(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

// writeTable prints one row per bucket and one column per series (and
// breakdown value), then the totals.
func (r *TrendResult) writeTable(w io.Writer) {
	head := fmt.Sprintf("trend %s .. %s (%s)", r.Range.From, r.Range.To, r.TZ)
	if c := r.CompareRange; c != nil {
		head += fmt.Sprintf(", compared with %s .. %s (by position)", c.From, c.To)
	}
	fmt.Fprintln(w, head)
	type column struct {
		name    string
		values  []string
		total   string
		current bool
	}
	var cols []column
	for _, s := range r.Series {
		name := s.Label
		if s.BreakdownValue != nil {
			name += " / " + *s.BreakdownValue
		}
		m := s.Math
		if s.Property != "" {
			m += " " + s.Property
		}
		c := column{name: fmt.Sprintf("%s (%s)", name, m), total: num(s.Total), current: s.Period != "previous"}
		if !c.current {
			c.name += " previous"
		}
		for _, b := range s.Buckets {
			c.values = append(c.values, num(b.Value))
		}
		cols = append(cols, c)
	}
	orNull := func(v *float64) string {
		if v == nil {
			return "null"
		}
		return num(*v)
	}
	for _, f := range r.Formulas {
		name := f.Label
		if f.BreakdownValue != nil {
			name += " / " + *f.BreakdownValue
		}
		c := column{name: name, total: orNull(f.Total), current: f.Period != "previous"}
		if !c.current {
			c.name += " previous"
		}
		for _, b := range f.Buckets {
			c.values = append(c.values, orNull(b.Value))
		}
		cols = append(cols, c)
	}
	var hdr strings.Builder
	hdr.WriteString("bucket\t")
	for _, c := range cols {
		fmt.Fprintf(&hdr, "%s\t", c.name)
	}
	fmt.Fprintln(w, hdr.String())
	if len(r.Series) == 0 {
		return
	}
	for b := range r.Series[0].Buckets {
		mark := ""
		if r.Series[0].Buckets[b].Incomplete {
			mark = "*"
		}
		fmt.Fprintf(w, "%s%s\t", label(r.Series[0].Buckets[b].Start), mark)
		for _, c := range cols {
			v := ""
			if b < len(c.values) {
				v = c.values[b]
			}
			fmt.Fprintf(w, "%s\t", v)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "total\t")
	for _, c := range cols {
		fmt.Fprintf(w, "%s\t", c.total)
	}
	fmt.Fprintln(w)
}

func dur(sec *float64) string {
	if sec == nil {
		return "-"
	}
	d := time.Duration(*sec * float64(time.Second)).Round(time.Second)
	if d >= 48*time.Hour {
		return fmt.Sprintf("%.1fd", d.Hours()/24)
	}
	return d.String()
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

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

func writeList(w io.Writer, what string, l *ListResult) {
	if l.BreakdownValue != nil {
		what += ", breakdown " + *l.BreakdownValue
	}
	fmt.Fprintf(w, "%s: %d\n", what, l.Users)
	writeIDs(w, l.UserIDs, l.Offset, l.Users)
}

func writeIDs(w io.Writer, ids []string, offset int, total int64) {
	if len(ids) == 0 {
		return
	}
	fmt.Fprintf(w, "user ids %d..%d of %d: %s\n", offset+1, offset+len(ids), total, strings.Join(ids, " "))
}

func writeSteps(w io.Writer, steps []FunnelStep) {
	fmt.Fprintln(w, "step\tevent\tusers\tconversion\tfrom previous\tavg time\tmedian time\t")
	for _, s := range steps {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t\n", s.Step, s.Label, s.Users, pct(s.Conversion),
			pct(s.ConversionFromPrevious), dur(s.AvgSeconds), dur(s.MedianSeconds))
	}
}

// writeTable prints one row per cohort (and breakdown value), then the
// mean per period.
func (r *RetentionResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "retention by %s, cohorts %s .. %s (%s); * = incomplete\n", r.Period, r.Range.From, r.Range.To, r.TZ)
	n := len(r.Mean)
	var hdr strings.Builder
	hdr.WriteString("cohort\tsize\t")
	for k := range n {
		fmt.Fprintf(&hdr, "%s %d\t", r.Period, k)
	}
	fmt.Fprintln(w, hdr.String())
	for _, c := range r.Cohorts {
		name := label(c.Start)
		if c.BreakdownValue != nil {
			name += " / " + *c.BreakdownValue
		}
		fmt.Fprintf(w, "%s\t%d\t", name, c.Size)
		for k := range c.Retained {
			mark := ""
			if c.Incomplete[k] {
				mark = "*"
			}
			fmt.Fprintf(w, "%s (%d)%s\t", pct(c.Rates[k]), c.Retained[k], mark)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "mean\t\t")
	for _, m := range r.Mean {
		if m == nil {
			fmt.Fprint(w, "-\t")
		} else {
			fmt.Fprintf(w, "%s\t", pct(*m))
		}
	}
	fmt.Fprintln(w)
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("users of cohort %s retained at %s %d", label(l.CohortStart), r.Period, l.Period), l)
	}
}

func ptr[T any](v T) *T { return &v }

// seriesName is a series' column title: label, then breakdown value.
func seriesName(label string, value *string) string {
	if value != nil {
		return label + " / " + *value
	}
	return label
}
