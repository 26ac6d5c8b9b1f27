package query

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// CSV columns per result kind (WriteCSV); docs/queries.md documents them.
var (
	trendCSV     = []string{"series", "label", "event", "math", "property", "breakdown_value", "bucket", "value", "incomplete", "total"}
	funnelCSV    = []string{"breakdown_value", "step", "event", "users", "conversion", "conversion_from_previous", "avg_seconds", "median_seconds"}
	retentionCSV = []string{"cohort_start", "breakdown_value", "size", "period", "retained", "rate", "incomplete"}
	usersCSV     = []string{"user_id"}
)

// WriteCSV writes a result as tidy CSV (RFC 4180, a header row first): a
// trend as one row per series × breakdown value × bucket (series is the
// query series' index, total the row's range total), a
// funnel as one row per step (breakdown_value empty for all users, then
// one row per breakdown value and step), a retention table as one row per
// cohort × breakdown value × period, and a cohort, or any result that
// lists users, as one row per listed user id (the page asked for). Empty
// fields are null values; numbers use the shortest exact decimal form.
// It returns the writer's error or an error for an unknown result type.
func WriteCSV(w io.Writer, res any) error {
	cw := csv.NewWriter(w)
	if ids, ok := listedIDs(res); ok {
		cw.Write(usersCSV)
		for _, id := range ids {
			cw.Write([]string{id})
		}
		cw.Flush()
		return cw.Error()
	}
	switch r := res.(type) {
	case *TrendResult:
		cw.Write(trendCSV)
		for _, s := range r.Series {
			for _, b := range s.Buckets {
				cw.Write([]string{strconv.Itoa(s.Series), s.Label, s.Event, s.Math, s.Property, strp(s.BreakdownValue), b.Start,
					fnum(b.Value), strconv.FormatBool(b.Incomplete), fnum(s.Total)})
			}
		}
	case *FunnelResult:
		cw.Write(funnelCSV)
		writeSteps := func(bv string, steps []FunnelStep) {
			for _, s := range steps {
				cw.Write([]string{bv, strconv.Itoa(s.Step), s.Event, strconv.FormatInt(s.Users, 10), fnum(s.Conversion),
					fnum(s.ConversionFromPrevious), fnump(s.AvgSeconds), fnump(s.MedianSeconds)})
			}
		}
		writeSteps("", r.Steps)
		for _, b := range r.Breakdown {
			writeSteps(b.Value, b.Steps)
		}
	case *RetentionResult:
		cw.Write(retentionCSV)
		for _, c := range r.Cohorts {
			for k, n := range c.Retained {
				cw.Write([]string{c.Start, strp(c.BreakdownValue), strconv.FormatInt(c.Size, 10), strconv.Itoa(k),
					strconv.FormatInt(n, 10), fnum(c.Rates[k]), strconv.FormatBool(c.Incomplete[k])})
			}
		}
	default:
		return fmt.Errorf("no CSV form for %T", res)
	}
	cw.Flush()
	return cw.Error()
}

// listedIDs returns the user ids a result lists: a cohort's page, or the
// list of a trend, funnel or retention query that asked for one.
func listedIDs(res any) ([]string, bool) {
	var l *ListResult
	switch r := res.(type) {
	case *CohortResult:
		return r.UserIDs, true
	case *TrendResult:
		l = r.List
	case *FunnelResult:
		l = r.List
	case *RetentionResult:
		l = r.List
	}
	if l == nil {
		return nil, false
	}
	return l.UserIDs, true
}

func fnum(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func fnump(v *float64) string {
	if v == nil {
		return ""
	}
	return fnum(*v)
}

func strp(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
