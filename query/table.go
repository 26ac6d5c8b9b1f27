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
// ids (each kind's writeTable, in its file, draws its own). Incomplete
// buckets and cells are marked with '*'. The result's
// warnings come first, one "warning: field: message" line each. It
// returns the writer's error, or an error for a nil res.
func WriteTable(w io.Writer, res Result) error {
	if res == nil {
		return fmt.Errorf("no table form for %T", res)
	}
	for _, wn := range *res.parts().warnings {
		if wn.Field != "" {
			fmt.Fprintf(w, "warning: %s: %s\n", wn.Field, wn.Message)
		} else {
			fmt.Fprintf(w, "warning: %s\n", wn.Message)
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	res.writeTable(tw)
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

func ptr[T any](v T) *T { return &v }

// seriesName is a series' column title: label, then breakdown value.
func seriesName(label string, value *string) string {
	if value != nil {
		return label + " / " + *value
	}
	return label
}
