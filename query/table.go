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
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	switch r := res.(type) {
	case *TrendResult:
		writeTrend(tw, r)
	case *FunnelResult:
		writeFunnel(tw, r)
	case *RetentionResult:
		writeRetention(tw, r)
	case *CohortResult:
		fmt.Fprintf(tw, "cohort (range %s .. %s, %s): %d users\n", r.Range.From, r.Range.To, r.TZ, r.Users)
		writeIDs(tw, r.UserIDs, r.Offset, r.Users)
	case *StickinessResult, *LifecycleResult, *PathsResult, *AttributionResult:
		writeKindTable(tw, r)
	default:
		return fmt.Errorf("no table form for %T", res)
	}
	return tw.Flush()
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

func writeTrend(w io.Writer, r *TrendResult) {
	fmt.Fprintf(w, "trend %s .. %s (%s)\n", r.Range.From, r.Range.To, r.TZ)
	var hdr strings.Builder
	hdr.WriteString("bucket\t")
	for _, s := range r.Series {
		name := s.Label
		if s.BreakdownValue != nil {
			name += " / " + *s.BreakdownValue
		}
		m := s.Math
		if s.Property != "" {
			m += " " + s.Property
		}
		fmt.Fprintf(&hdr, "%s (%s)\t", name, m)
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
		for _, s := range r.Series {
			fmt.Fprintf(w, "%s\t", num(s.Buckets[b].Value))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprint(w, "total\t")
	for _, s := range r.Series {
		fmt.Fprintf(w, "%s\t", num(s.Total))
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

func writeFunnel(w io.Writer, r *FunnelResult) {
	fmt.Fprintf(w, "funnel %s .. %s (%s), window %s\n", r.Range.From, r.Range.To, r.TZ, dur(ptr(float64(r.WindowSec))))
	writeSteps(w, r.Steps)
	for _, b := range r.Breakdown {
		fmt.Fprintf(w, "breakdown %s\n", b.Value)
		writeSteps(w, b.Steps)
	}
	if l := r.List; l != nil {
		what := fmt.Sprintf("users who reached step %d", l.Step)
		if l.Dropped {
			what = fmt.Sprintf("users who dropped off after step %d", l.Step)
		}
		writeList(w, what, l)
	}
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
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\t%s\t%s\t\n", s.Step, s.Event, s.Users, pct(s.Conversion),
			pct(s.ConversionFromPrevious), dur(s.AvgSeconds), dur(s.MedianSeconds))
	}
}

func writeRetention(w io.Writer, r *RetentionResult) {
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
