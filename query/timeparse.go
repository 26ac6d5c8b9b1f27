package query

import (
	"strconv"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/timebucket"
)

const (
	second = int64(1_000_000) // µs
	day    = 86400 * second
)

// ParseDuration parses a spec §9 duration — an integer followed by s, m, h,
// d or w ("90s", "30m", "12h", "7d", "2w") — into microseconds. Days and
// weeks are fixed 86400 s and 7 × 86400 s. It returns an error for anything
// else, including negative or overflowing values.
func ParseDuration(s string) (int64, error) {
	if len(s) < 2 {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, strconv.ErrSyntax
	}
	var unit int64
	switch s[len(s)-1] {
	case 's':
		unit = second
	case 'm':
		unit = 60 * second
	case 'h':
		unit = 3600 * second
	case 'd':
		unit = day
	case 'w':
		unit = 7 * day
	default:
		return 0, strconv.ErrSyntax
	}
	if n > (1<<62)/unit {
		return 0, strconv.ErrRange
	}
	return n * unit, nil
}

// parseInstant parses a range bound, a cohort window bound or a listed
// cohort's start with event.ParseDateTime: a date YYYY-MM-DD (local
// midnight in loc, or the first instant of that day if midnight does not
// exist), or a date-time with an offset (RFC 3339 and the ISO 8601 offsets
// ±hh, ±hhmm: "2024-02-23 13:49:26.513+00") or without one (wall clock in
// loc). Epoch numbers are not accepted. It returns UTC microseconds.
func parseInstant(s string, loc *time.Location) (int64, bool) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return timebucket.DateStart(d.Year(), d.Month(), d.Day(), loc), true
	}
	us, err := event.ParseDateTime(s, loc)
	return us, err == nil
}

// formatTime renders UTC microseconds as RFC 3339 in loc (spec §9 bucket
// labels), with fractional seconds only when present.
func formatTime(us int64, loc *time.Location) string {
	return time.UnixMicro(us).In(loc).Format(time.RFC3339Nano)
}
