// Package timebucket computes calendar buckets (hour, day, week, month) in
// an IANA time zone, as spec §2 defines them: civil-time buckets, never UTC
// buckets relabelled.
//
// All instants are int64 UTC microseconds since the Unix epoch. A calendar
// is the set of its boundary instants; bucket b of a boundary list B is the
// half-open range [B[b], B[b+1]).
//
// Boundaries:
//   - day, week, month: the first instant of the local date that starts the
//     bucket (local midnight; a week starts on local Monday, or Sunday with
//     [Sunday]; a month on the 1st). Where local midnight does not exist
//     (a DST change at midnight, e.g. America/Sao_Paulo 2015-10-18 started at
//     01:00) the bucket starts at the first instant of that local date. A
//     day is therefore 23 or 25 hours long across DST changes; a date skipped
//     entirely (Pacific/Apia 2011-12-30) is no bucket at all.
//   - hour: every instant at which the local wall clock reads a whole hour
//     (hh:00:00). Across a fall-back DST change the repeated local hour is
//     two buckets (e.g. America/New_York 2021-11-07 01:00-04:00 and
//     01:00-05:00), as ClickHouse's toStartOfHour(t, tz) (used by PostHog)
//     gives; a skipped local hour is no bucket. In zones with fractional
//     offsets (Asia/Kolkata +05:30) hour buckets start at hh:30 UTC.
//
// Time zone transitions are whole seconds, so every boundary is a whole
// second. The functions are pure and safe for concurrent use. They are not
// meant for a per-event path: analysis kernels walk a precomputed boundary
// list with a cursor.
package timebucket

import (
	"fmt"
	"time"
)

// Interval is the length of a calendar bucket.
type Interval uint8

// Intervals. The zero value is not a valid interval.
const (
	Hour Interval = iota + 1
	Day
	Week
	Month
)

// Rolling period lengths in microseconds (spec §2, "rolling periods are
// fixed durations": hour 3600 s, day 86400 s, week 7 days, month 30 days).
const (
	HourMicros  int64 = 3600 * 1e6
	DayMicros   int64 = 24 * HourMicros
	WeekMicros  int64 = 7 * DayMicros
	MonthMicros int64 = 30 * DayMicros
)

var intervalNames = [...]string{"", "hour", "day", "week", "month"}

// String returns the query-language name of iv ("hour", "day", "week",
// "month"), or "interval(N)" for an invalid value.
func (iv Interval) String() string {
	if iv >= Hour && iv <= Month {
		return intervalNames[iv]
	}
	return fmt.Sprintf("interval(%d)", uint8(iv))
}

// Rolling returns the fixed rolling-period length of iv in microseconds
// (HourMicros, DayMicros, WeekMicros or MonthMicros), or 0 for an invalid
// interval.
func (iv Interval) Rolling() int64 {
	switch iv {
	case Hour:
		return HourMicros
	case Day:
		return DayMicros
	case Week:
		return WeekMicros
	case Month:
		return MonthMicros
	}
	return 0
}

// ParseInterval parses "hour", "day", "week" or "month" (exact, lower
// case). Any other input returns an error naming the accepted values.
func ParseInterval(s string) (Interval, error) {
	for i := Hour; i <= Month; i++ {
		if intervalNames[i] == s {
			return i, nil
		}
	}
	return 0, fmt.Errorf("timebucket: unknown interval %q (want hour, day, week or month)", s)
}

// WeekStart is the first day of a calendar week. The zero value is Monday,
// the default of spec §2.
type WeekStart uint8

// Week starts.
const (
	Monday WeekStart = iota
	Sunday
)

// String returns "monday" or "sunday", or "weekstart(N)" for an invalid
// value.
func (ws WeekStart) String() string {
	switch ws {
	case Monday:
		return "monday"
	case Sunday:
		return "sunday"
	}
	return fmt.Sprintf("weekstart(%d)", uint8(ws))
}

// ParseWeekStart parses "monday" or "sunday"; the empty string is the
// default, Monday. Any other input returns an error naming the accepted
// values.
func ParseWeekStart(s string) (WeekStart, error) {
	switch s {
	case "", "monday":
		return Monday, nil
	case "sunday":
		return Sunday, nil
	}
	return 0, fmt.Errorf("timebucket: unknown week start %q (want monday or sunday)", s)
}

// Floor returns the start (UTC microseconds) of the calendar bucket of
// interval iv in location loc that contains the instant t (UTC
// microseconds): the latest boundary ≤ t (see the package doc for the
// boundaries). A nil loc means UTC. It panics on an invalid iv (a
// programmer error: validate with ParseInterval).
func Floor(t int64, iv Interval, loc *time.Location, ws WeekStart) int64 {
	return floorSec(floorDiv(t, 1e6), iv, orUTC(loc), ws) * 1e6
}

// Next returns the first boundary of the calendar (iv, loc, ws) strictly
// after the instant t (UTC microseconds). For a boundary b, [b, Next(b))
// is one bucket. A nil loc means UTC. It panics on an invalid iv.
func Next(t int64, iv Interval, loc *time.Location, ws WeekStart) int64 {
	return nextSec(floorDiv(t, 1e6), iv, orUTC(loc), ws) * 1e6
}

// Bounds returns the bucket boundaries covering [from, to) (UTC
// microseconds): Floor(from), then each next boundary, up to and including
// the first boundary ≥ to. Bucket b is [B[b], B[b+1]); len(B)-1 buckets.
// The first bucket may start before from and is labelled by its calendar
// start (spec §2: a weekly range starting Saturday 2021-05-01 has a first
// bucket starting Monday 2021-04-26). If to ≤ Floor(from) the result is the
// single boundary Floor(from) (no bucket). The returned slice is newly
// allocated and owned by the caller. A nil loc means UTC. It panics on an
// invalid iv.
func Bounds(from, to int64, iv Interval, loc *time.Location, ws WeekStart) []int64 {
	loc = orUTC(loc)
	b := floorSec(floorDiv(from, 1e6), iv, loc, ws)
	out := []int64{b * 1e6}
	for b*1e6 < to {
		b = nextSec(b, iv, loc, ws)
		out = append(out, b*1e6)
	}
	return out
}

// Extend appends n further boundaries of the calendar (iv, loc, ws) after
// the last element of bounds and returns the extended slice (append
// semantics: it may reuse bounds' backing array). Retention uses it to add
// the N periods that follow the last cohort bucket. bounds must be
// non-empty; it panics otherwise or on an invalid iv.
func Extend(bounds []int64, n int, iv Interval, loc *time.Location, ws WeekStart) []int64 {
	if len(bounds) == 0 {
		panic("timebucket: Extend of empty bounds")
	}
	loc = orUTC(loc)
	b := floorDiv(bounds[len(bounds)-1], 1e6)
	for range n {
		b = nextSec(b, iv, loc, ws)
		bounds = append(bounds, b*1e6)
	}
	return bounds
}

func orUTC(loc *time.Location) *time.Location {
	if loc == nil {
		return time.UTC
	}
	return loc
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// segment describes the zone period containing an instant: [start, end)
// in Unix seconds with a constant UTC offset in seconds. hasStart/hasEnd
// are false when the period is unbounded on that side.
type segment struct {
	start, end       int64
	hasStart, hasEnd bool
	offset           int64
}

func segmentAt(sec int64, loc *time.Location) segment {
	t := time.Unix(sec, 0).In(loc)
	_, off := t.Zone()
	s, e := t.ZoneBounds()
	return segment{
		start: s.Unix(), hasStart: !s.IsZero(),
		end: e.Unix(), hasEnd: !e.IsZero(),
		offset: int64(off),
	}
}

// wallSec returns the local wall-clock reading of instant sec as seconds
// since 1970-01-01T00:00:00 of the wall clock.
func wallSec(sec int64, loc *time.Location) int64 {
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return sec + int64(off)
}

// civil returns the wall-clock seconds of local date y-m-d 00:00:00
// (normalised like time.Date: day 0 is the last day of the previous month).
func civil(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
}

// dateStart returns the wall-clock seconds of the start (00:00) of the
// date-based bucket (day, week or month) containing wall-clock reading w.
func dateStart(w int64, iv Interval, ws WeekStart) int64 {
	t := time.Unix(w, 0).UTC()
	y, m, d := t.Date()
	switch iv {
	case Day:
		return civil(y, m, d)
	case Week:
		back := int(t.Weekday()) // Sunday = 0
		if ws != Sunday {
			back = (back + 6) % 7
		}
		return civil(y, m, d-back)
	case Month:
		return civil(y, m, 1)
	}
	panic(fmt.Sprintf("timebucket: invalid date interval %v", iv))
}

// nextDateStart returns the wall-clock start of the bucket after the one
// starting at wall-clock w (a value returned by dateStart).
func nextDateStart(w int64, iv Interval) int64 {
	y, m, d := time.Unix(w, 0).UTC().Date()
	switch iv {
	case Day:
		return civil(y, m, d+1)
	case Week:
		return civil(y, m, d+7)
	case Month:
		return civil(y, m+1, 1)
	}
	panic(fmt.Sprintf("timebucket: invalid date interval %v", iv))
}

// maxOffsetSec bounds the absolute UTC offset of any zone in the tz
// database (the largest, local mean times and +14:00, are below 16 hours).
const maxOffsetSec = 16 * 3600

// firstInstant returns the earliest instant (Unix seconds) whose wall-clock
// reading is ≥ w: the first instant of a local date when w is its midnight.
// It walks the zone periods forward from a point whose wall clock is
// certainly before w.
func firstInstant(w int64, loc *time.Location) int64 {
	u := w - 2*maxOffsetSec
	for {
		seg := segmentAt(u, loc)
		cand := max(u, w-seg.offset)
		if !seg.hasEnd || cand < seg.end {
			return cand
		}
		u = seg.end
	}
}

func floorSec(sec int64, iv Interval, loc *time.Location, ws WeekStart) int64 {
	if iv == Hour {
		return floorHour(sec, loc)
	}
	b := firstInstant(dateStart(wallSec(sec, loc), iv, ws), loc)
	// Where the wall clock runs backwards across a bucket start the first
	// instant of the current wall bucket can precede a later boundary that
	// is still ≤ sec; walk forward so that Floor is always the latest
	// boundary ≤ sec, consistent with Next and Bounds.
	for {
		n := nextSec(b, iv, loc, ws)
		if n > sec {
			return b
		}
		b = n
	}
}

func nextSec(sec int64, iv Interval, loc *time.Location, ws WeekStart) int64 {
	if iv == Hour {
		return nextHour(sec, loc)
	}
	w := dateStart(wallSec(sec, loc), iv, ws)
	for {
		w = nextDateStart(w, iv)
		if b := firstInstant(w, loc); b > sec {
			return b
		}
	}
}

// floorHour returns the latest instant ≤ sec at which the wall clock read
// a whole hour, walking zone periods backwards.
func floorHour(sec int64, loc *time.Location) int64 {
	for {
		seg := segmentAt(sec, loc)
		u := sec - mod(sec+seg.offset, 3600)
		if !seg.hasStart || u >= seg.start {
			return u
		}
		sec = seg.start - 1
	}
}

// nextHour returns the earliest instant > sec at which the wall clock
// reads a whole hour, walking zone periods forwards.
func nextHour(sec int64, loc *time.Location) int64 {
	u := sec + 1
	for {
		seg := segmentAt(u, loc)
		c := u + mod(-(u+seg.offset), 3600)
		if !seg.hasEnd || c < seg.end {
			return c
		}
		u = seg.end
	}
}
