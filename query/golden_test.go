package query

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/storage"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/golden/*.txt after review")

// TestGolden runs the engine-level golden cases of testdata/golden/*.txt
// (format of testutil.ParseCases): each case imports its events and user
// property writes, runs its queries, and compares the rendering below,
// with 1 and 4 shards (which must agree). Input lines:
//
//	e USER TIME NAME [prop=value …]   an event
//	u USER TIME [prop=value …]        a user property write
//	q {JSON query}                    a query (app, now and tz default to g, 2030-01-01, UTC)
//	# comment
//
// TIME is RFC 3339. A value is an int, a float (with a '.'), true/false,
// @RFC3339 for a time, or else a string ("quoted" to force a string).
func TestGolden(t *testing.T) {
	testutil.RunCaseFiles(t, "testdata/golden/*.txt", *rewrite, func(t *testing.T, where string, input []string) string {
		var outs [2]string
		for j, shards := range []int{1, 4} {
			out, err := runGoldenCase(t, input, shards)
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			outs[j] = out
		}
		if outs[0] != outs[1] {
			t.Fatalf("%s: 1 and 4 shards disagree\n%s\n%s", where, outs[0], outs[1])
		}
		return outs[0]
	})
}

// goldenRows is an import source over parsed lines.
type goldenRows struct {
	evs []event.Event
	i   int
}

func (g *goldenRows) Next(ev *event.Event) error {
	if g.i == len(g.evs) {
		return io.EOF
	}
	*ev = g.evs[g.i]
	g.i++
	return nil
}

func runGoldenCase(t *testing.T, input []string, shards int) (string, error) {
	var evs, users []event.Event
	var queries []string
	for n, l := range input {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		kind, rest, _ := strings.Cut(l, " ")
		if kind == "q" {
			queries = append(queries, rest)
			continue
		}
		f := strings.Fields(rest)
		min := 3
		if kind == "u" {
			min = 2
		}
		if (kind != "e" && kind != "u") || len(f) < min {
			return "", fmt.Errorf("input line %d: %q: want e USER TIME NAME …, u USER TIME … or q JSON", n+1, l)
		}
		ts, err := time.Parse(time.RFC3339Nano, f[1])
		if err != nil {
			return "", fmt.Errorf("input line %d: %w", n+1, err)
		}
		ev := event.Event{UserID: f[0], Time: ts.UnixMicro(), Pos: event.Pos{File: "golden", Line: int64(n + 1)}}
		props := f[2:]
		if kind == "e" {
			ev.Name, props = f[2], f[3:]
		}
		for _, kv := range props {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return "", fmt.Errorf("input line %d: property %q is not name=value", n+1, kv)
			}
			ev.Props = append(ev.Props, event.Prop{Name: k, Value: goldenValue(v)})
		}
		if kind == "e" {
			evs = append(evs, ev)
		} else {
			users = append(users, ev)
		}
	}
	st := openStore(t, t.TempDir(), shards)
	if _, err := st.Import(context.Background(), "g", []storage.Source{&goldenRows{evs: evs}}, storage.ImportOptions{BlockRows: 3}); err != nil {
		return "", err
	}
	if len(users) > 0 {
		if _, err := st.Import(context.Background(), "g", []storage.Source{&goldenRows{evs: users}}, storage.ImportOptions{Kind: storage.KindUsers}); err != nil {
			return "", err
		}
	}
	eng := New(st, Config{Workers: shards})
	var b strings.Builder
	for _, js := range queries {
		q, err := Parse([]byte(js))
		if err == nil {
			if q.App == "" {
				q.App = "g"
			}
			if q.Now == "" {
				q.Now = "2030-01-01T00:00:00Z"
			}
			var res Result
			if res, err = eng.Run(context.Background(), q); err == nil {
				renderGolden(&b, res)
				continue
			}
		}
		var qe *Error
		if !errors.As(err, &qe) {
			return "", err
		}
		fmt.Fprintf(&b, "error %s %s: %s\n", qe.Code, qe.Field, qe.Message)
	}
	return b.String(), nil
}

func goldenValue(v string) event.Value {
	if strings.HasPrefix(v, `"`) {
		return event.String(strings.Trim(v, `"`))
	}
	if strings.HasPrefix(v, "@") {
		ts, err := time.Parse(time.RFC3339Nano, v[1:])
		if err == nil {
			return event.Time(ts.UnixMicro())
		}
	}
	if v == "true" || v == "false" {
		return event.Bool(v == "true")
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return event.Int(i)
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && strings.Contains(v, ".") {
		return event.Float(f)
	}
	return event.String(v)
}

func fmtG(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// renderGolden prints a result compactly with exact numbers.
func renderGolden(b *strings.Builder, res Result) {
	switch r := res.(type) {
	case *TrendResult:
		if len(r.Series) == 0 {
			b.WriteString("no series rows\n")
		}
		if c := r.CompareRange; c != nil {
			fmt.Fprintf(b, "range %s %s compared with %s %s\n", r.Range.From, r.Range.To, c.From, c.To)
		}
		for _, s := range r.Series {
			fmt.Fprintf(b, "series %s %s", s.Label, s.Math)
			if s.Property != "" {
				fmt.Fprintf(b, "(%s)", s.Property)
			}
			if s.Period != "" {
				fmt.Fprintf(b, " %s", s.Period)
			}
			if s.BreakdownValue != nil {
				fmt.Fprintf(b, " [%s]", *s.BreakdownValue)
			}
			b.WriteString(":")
			for _, bk := range s.Buckets {
				fmt.Fprintf(b, " %s", fmtG(bk.Value))
			}
			fmt.Fprintf(b, " | total %s\n", fmtG(s.Total))
			if s.Period == "previous" {
				var starts []string
				for _, bk := range s.Buckets {
					starts = append(starts, bk.Start)
				}
				fmt.Fprintf(b, "  previous buckets %s\n", strings.Join(starts, " "))
			}
		}
		orNull := func(v *float64) string {
			if v == nil {
				return "null"
			}
			return fmtG(*v)
		}
		for _, f := range r.Formulas {
			fmt.Fprintf(b, "formula %s", f.Formula)
			if f.Period != "" {
				fmt.Fprintf(b, " %s", f.Period)
			}
			if f.BreakdownValue != nil {
				fmt.Fprintf(b, " [%s]", *f.BreakdownValue)
			}
			b.WriteString(":")
			for _, bk := range f.Buckets {
				fmt.Fprintf(b, " %s", orNull(bk.Value))
			}
			fmt.Fprintf(b, " | total %s\n", orNull(f.Total))
		}
		if len(r.Series) > 0 {
			var starts []string
			for _, bk := range r.Series[0].Buckets {
				starts = append(starts, bk.Start)
			}
			fmt.Fprintf(b, "buckets %s\n", strings.Join(starts, " "))
		}
	case *FunnelResult:
		view := func(prefix string, ss []FunnelStep, bs []FunnelTrendBucket, ft *FunnelTimes) {
			for _, s := range ss {
				fmt.Fprintf(b, "%sstep %d %s users=%d conversion=%s from_previous=%s", prefix, s.Step, s.Label, s.Users, fmtG(s.Conversion), fmtG(s.ConversionFromPrevious))
				if s.AvgSeconds != nil {
					fmt.Fprintf(b, " avg_s=%s median_s=%s", fmtG(*s.AvgSeconds), fmtG(*s.MedianSeconds))
				}
				b.WriteString("\n")
			}
			for _, bk := range bs {
				conv := "null"
				if bk.Conversion != nil {
					conv = fmtG(*bk.Conversion)
				}
				fmt.Fprintf(b, "%sbucket %s entered=%d converted=%d conversion=%s incomplete=%v\n", prefix, bk.Start, bk.Entered, bk.Converted, conv, bk.Incomplete)
			}
			if ft != nil {
				fmt.Fprintf(b, "%susers=%d", prefix, ft.Users)
				if ft.AverageSeconds != nil {
					fmt.Fprintf(b, " avg_s=%s median_s=%s", fmtG(*ft.AverageSeconds), fmtG(*ft.MedianSeconds))
				}
				for _, bin := range ft.Histogram {
					fmt.Fprintf(b, " [%d,%d)=%d", bin.FromSeconds, bin.ToSeconds, bin.Users)
				}
				b.WriteString("\n")
			}
		}
		view("", r.Steps, r.Buckets, r.FunnelTimes)
		for _, bd := range r.Breakdown {
			view("["+bd.Value+"] ", bd.Steps, bd.Buckets, bd.FunnelTimes)
		}
		renderList(b, r.List)
	case *RetentionResult:
		for _, c := range r.Cohorts {
			fmt.Fprintf(b, "cohort %s", c.Start)
			if c.BreakdownValue != nil {
				fmt.Fprintf(b, " [%s]", *c.BreakdownValue)
			}
			fmt.Fprintf(b, " size=%d retained=%v incomplete=%v\n", c.Size, c.Retained, c.Incomplete)
		}
		var mean []string
		for _, m := range r.Mean {
			if m == nil {
				mean = append(mean, "null")
			} else {
				mean = append(mean, fmtG(*m))
			}
		}
		fmt.Fprintf(b, "mean %s\n", strings.Join(mean, " "))
		renderList(b, r.List)
	case *CohortResult:
		fmt.Fprintf(b, "cohort users=%d ids=%s\n", r.Users, strings.Join(r.UserIDs, ","))
	}
}

func renderList(b *strings.Builder, l *ListResult) {
	if l != nil {
		fmt.Fprintf(b, "list users=%d ids=%s\n", l.Users, strings.Join(l.UserIDs, ","))
	}
}
