package query

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/timebucket"
)

const (
	second = int64(1_000_000) // µs
	day    = 86400 * second
)

// durationUnits are the units of docs/analytics.md §9 durations, longest suffix first
// ("mo" before "m").
var durationUnits = []string{"mo", "s", "m", "h", "d", "w", "y"}

// Duration is a parsed docs/analytics.md §9 duration: N units, N signed only where
// the grammar allows it (compare offsets).
type Duration struct {
	N    int64
	Unit string // s, m, h, d, w, mo or y
}

// ParseDurationSpec parses a docs/analytics.md §9 duration — an integer followed by s,
// m (minutes), h, d, w, mo (months) or y (years): "90s", "30m", "12h",
// "7d", "2w", "3mo", "1y" — into its number and unit. With signed, a
// leading "-" or "+" is accepted (compare offsets: "-1w"); without, the
// number must be a plain non-negative integer. It returns an error for
// anything else.
func ParseDurationSpec(s string, signed bool) (Duration, error) {
	for _, u := range durationUnits {
		num, ok := strings.CutSuffix(s, u)
		if !ok || num == "" {
			continue
		}
		if !signed && (num[0] == '-' || num[0] == '+') {
			return Duration{}, strconv.ErrSyntax
		}
		if signed && num[0] != '-' && num[0] != '+' && (num[0] < '0' || num[0] > '9') {
			return Duration{}, strconv.ErrSyntax
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return Duration{}, strconv.ErrSyntax
		}
		return Duration{N: n, Unit: u}, nil
	}
	return Duration{}, strconv.ErrSyntax
}

// Fixed returns the duration's fixed length in µs (docs/analytics.md §9: a month is 30
// days, a year 365), or an error when it overflows 2^62.
func (d Duration) Fixed() (int64, error) {
	var unit int64
	switch d.Unit {
	case "s":
		unit = second
	case "m":
		unit = 60 * second
	case "h":
		unit = 3600 * second
	case "d":
		unit = day
	case "w":
		unit = 7 * day
	case "mo":
		unit = 30 * day
	case "y":
		unit = 365 * day
	default:
		return 0, strconv.ErrSyntax
	}
	if d.N > (1<<62)/unit || d.N < -(1<<62)/unit {
		return 0, strconv.ErrRange
	}
	return d.N * unit, nil
}

// Calendar reports whether the unit moves along the calendar (days,
// weeks, months, years) rather than the clock.
func (d Duration) Calendar() bool {
	switch d.Unit {
	case "d", "w", "mo", "y":
		return true
	}
	return false
}

// Shift returns t (UTC µs) moved by the duration along the calendar in
// loc for calendar units — days and weeks keep the wall-clock time across
// daylight saving changes; months and years keep the day of the month,
// clamped to the target month's last day (March 31 − 1 month is February
// 28 or 29, as dateutil's relativedelta and ClickHouse's subtractMonths
// do) — and by the fixed length otherwise.
func (d Duration) Shift(t int64, loc *time.Location) (int64, error) {
	if !d.Calendar() {
		f, err := d.Fixed()
		return t + f, err
	}
	if d.N > 1e6 || d.N < -1e6 {
		return 0, strconv.ErrRange
	}
	n := int(d.N)
	tt := time.UnixMicro(t).In(loc)
	switch d.Unit {
	case "d":
		tt = tt.AddDate(0, 0, n)
	case "w":
		tt = tt.AddDate(0, 0, 7*n)
	case "mo":
		tt = addMonths(tt, n)
	case "y":
		tt = addMonths(tt, 12*n)
	}
	return tt.UnixMicro(), nil
}

// addMonths moves t by n calendar months in its zone, clamping the day to
// the target month's length and keeping the wall-clock time.
func addMonths(t time.Time, n int) time.Time {
	y, m, d := t.Date()
	first := time.Date(y, m+time.Month(n), 1, 0, 0, 0, 0, time.UTC) // target month, normalised
	last := first.AddDate(0, 1, -1).Day()
	return time.Date(first.Year(), first.Month(), min(d, last), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
}

// ParseDuration parses an unsigned docs/analytics.md §9 duration ("90s", "30m", "12h",
// "7d", "2w", "3mo", "1y") into its fixed length in microseconds: days
// are 86400 s, weeks 7 days, months 30 days and years 365 days. It
// returns an error for anything else, including negative or overflowing
// values.
func ParseDuration(s string) (int64, error) {
	d, err := ParseDurationSpec(s, false)
	if err != nil {
		return 0, err
	}
	return d.Fixed()
}

// relativeRange resolves a docs/analytics.md §2 relative range ("last") at now in loc:
// for d, w, mo and y the calendar days (weeks: 7 days each), months or
// years in loc ending with today's (today included: to is the local
// midnight after today, or the first of next month or year); for s, m
// and h the fixed span [now − N, now). N must be ≥ 1.
func relativeRange(last string, now int64, loc *time.Location) (from, to int64, err error) {
	d, err := ParseDurationSpec(last, false)
	if err != nil || d.N < 1 {
		return 0, 0, fmt.Errorf("want a positive duration such as \"7d\", \"4w\", \"3mo\", \"1y\" or \"24h\", found %q", last)
	}
	if !d.Calendar() {
		f, err := d.Fixed()
		if err != nil {
			return 0, 0, fmt.Errorf("%q is too long", last)
		}
		return now - f, now, nil
	}
	if d.N > 100000 {
		return 0, 0, fmt.Errorf("%q is too long", last)
	}
	n := int(d.N)
	t := time.UnixMicro(now).In(loc)
	y, m, dd := t.Date()
	date := timebucket.DateStart
	switch d.Unit {
	case "d":
		return date(y, m, dd-n+1, loc), date(y, m, dd+1, loc), nil
	case "w":
		return date(y, m, dd-7*n+1, loc), date(y, m, dd+1, loc), nil
	case "mo":
		return date(y, m-time.Month(n-1), 1, loc), date(y, m+1, 1, loc), nil
	}
	return date(y-n+1, 1, 1, loc), date(y+1, 1, 1, loc), nil
}

// parseInstant parses a range bound, a cohort window bound or a listed
// cohort's start with event.ParseDateTime: a date YYYY-MM-DD (local
// midnight in loc, or the first instant of that day if midnight does not
// exist), or a date-time with an offset (RFC 3339 and the ISO 8601 offsets
// ±hh, ±hhmm: "2024-02-23 13:49:26.513+00") or without one (wall clock in
// loc). Epoch numbers are not accepted. It returns UTC microseconds.
func parseInstant(s string, loc *time.Location) (int64, bool) {
	us, _, ok := parseBound(s, loc)
	return us, ok
}

// parseBound is parseInstant that also reports whether s was a date.
func parseBound(s string, loc *time.Location) (us int64, date, ok bool) {
	if d, err := time.Parse(time.DateOnly, s); err == nil {
		return timebucket.DateStart(d.Year(), d.Month(), d.Day(), loc), true, true
	}
	us, err := event.ParseDateTime(s, loc)
	return us, false, err == nil
}

// formatTime renders UTC microseconds as RFC 3339 in loc (docs/analytics.md §9 bucket
// labels), with fractional seconds only when present.
func formatTime(us int64, loc *time.Location) string {
	return time.UnixMicro(us).In(loc).Format(time.RFC3339Nano)
}
