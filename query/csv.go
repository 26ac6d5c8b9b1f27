package query

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
)

// usersCSV is the CSV column of user ids (WriteCSV, for a result that
// lists users; each kind's file holds its own columns); docs/queries.md
// documents them.
var usersCSV = []string{"user_id"}

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
// form. It returns the writer's error, or an error for a nil res.
func WriteCSV(w io.Writer, res Result) error {
	if res == nil {
		return fmt.Errorf("no CSV form for %T", res)
	}
	cw := csv.NewWriter(w)
	if ids, ok := listedIDs(res); ok {
		writeIDsCSV(cw, ids)
	} else {
		res.writeCSV(cw)
	}
	cw.Flush()
	return cw.Error()
}

// writeIDsCSV writes a header and one row per user id.
func writeIDsCSV(cw *csv.Writer, ids []string) {
	cw.Write(usersCSV)
	for _, id := range ids {
		cw.Write([]string{id})
	}
}

// listedIDs returns the user ids a result lists: a cohort's page, or the
// list of any other query that asked for one.
func listedIDs(res Result) ([]string, bool) {
	f := res.parts()
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
