package query

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// CSV columns of the trend, funnel and retention results and of user ids
// (WriteCSV; the other kinds hold theirs in their files); docs/queries.md
// documents them.
var (
	trendCSV        = []string{"series", "label", "event", "math", "property", "breakdown_value", "bucket", "value", "incomplete", "total", "period"}
	funnelCSV       = []string{"breakdown_value", "step", "label", "event", "users", "conversion", "conversion_from_previous", "avg_seconds", "median_seconds"}
	funnelTrendsCSV = []string{"breakdown_value", "bucket", "entered", "converted", "conversion", "incomplete"}
	funnelTimesCSV  = []string{"breakdown_value", "from_seconds", "to_seconds", "users"}
	retentionCSV    = []string{"cohort_start", "breakdown_value", "size", "period", "retained", "rate", "incomplete"}
	usersCSV        = []string{"user_id"}
)

// WriteCSV writes a result as tidy CSV (RFC 4180, a header row first), one
// row per:
//
//   - trend: series × breakdown value × bucket (series is the query
//     series' index, total the row's range total, period "current" or
//     "previous" with compare), then per formula × breakdown value ×
//     bucket (series empty, math "formula");
//   - funnel: step (view steps), bucket (view trends) or histogram bin
//     (view time_to_convert), for all users (breakdown_value empty) then
//     per breakdown value;
//   - retention: cohort × breakdown value × period;
//   - stickiness: series × breakdown value × number of active intervals;
//   - lifecycle: breakdown value (empty for all users) × bucket × status;
//   - paths: edge;
//   - attribution: channel × breakdown value (bucket empty), then with an
//     interval channel × breakdown value × bucket;
//   - cohort, or any result that lists users: listed user id (the page
//     asked for).
//
// Empty fields are null values; numbers use the shortest exact decimal
// form. It returns the writer's error or an error for an unknown result
// type.
func WriteCSV(w io.Writer, res any) error {
	cw := csv.NewWriter(w)
	if ids, ok := listedIDs(res); ok {
		writeIDsCSV(cw, ids)
		cw.Flush()
		return cw.Error()
	}
	r, ok := res.(Result)
	if !ok {
		return fmt.Errorf("no CSV form for %T", res)
	}
	r.writeCSV(cw)
	cw.Flush()
	return cw.Error()
}

// writeCSV writes one row per cohort × breakdown value × period.
func (r *RetentionResult) writeCSV(cw *csv.Writer) {
	cw.Write(retentionCSV)
	for _, c := range r.Cohorts {
		for k, n := range c.Retained {
			cw.Write([]string{c.Start, strp(c.BreakdownValue), inum(c.Size), strconv.Itoa(k),
				inum(n), fnum(c.Rates[k]), strconv.FormatBool(c.Incomplete[k])})
		}
	}
}

// writeCSV writes one row per listed user id.
func (r *CohortResult) writeCSV(cw *csv.Writer) { writeIDsCSV(cw, r.UserIDs) }

// writeIDsCSV writes a header and one row per user id.
func writeIDsCSV(cw *csv.Writer, ids []string) {
	cw.Write(usersCSV)
	for _, id := range ids {
		cw.Write([]string{id})
	}
}

// writeCSV writes one row per series × breakdown value × bucket, then per
// formula × breakdown value × bucket.
func (r *TrendResult) writeCSV(cw *csv.Writer) {
	cw.Write(trendCSV)
	for _, s := range r.Series {
		for _, b := range s.Buckets {
			cw.Write([]string{strconv.Itoa(s.Series), s.Label, s.Event, s.Math, s.Property, strp(s.BreakdownValue), b.Start,
				fnum(b.Value), strconv.FormatBool(b.Incomplete), fnum(s.Total), s.Period})
		}
	}
	for _, f := range r.Formulas {
		for _, b := range f.Buckets {
			cw.Write([]string{"", f.Label, "", "formula", "", strp(f.BreakdownValue), b.Start, fnump(b.Value), "", fnump(f.Total), f.Period})
		}
	}
}

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

// listedIDs returns the user ids a result lists: a cohort's page, or the
// list of any other query that asked for one.
func listedIDs(res any) ([]string, bool) {
	r, ok := res.(Result)
	if !ok {
		return nil, false
	}
	f := r.parts()
	if f.ids != nil {
		return *f.ids, true
	}
	if f.list != nil && *f.list != nil {
		return (*f.list).UserIDs, true
	}
	return nil, false
}

func inum(v int64) string { return strconv.FormatInt(v, 10) }

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
