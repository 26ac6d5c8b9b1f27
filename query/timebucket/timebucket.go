// Package timebucket computes calendar buckets (hour, day, week, month) in
// an IANA time zone, as docs/analytics.md §2 defines them: civil-time buckets, never UTC
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
	"context"
	"fmt"
	"math"
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

// Rolling period lengths in microseconds (docs/analytics.md §2, "rolling periods are
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
// the default of docs/analytics.md §2.
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
// start (docs/analytics.md §2: a weekly range starting Saturday 2021-05-01 has a first
// bucket starting Monday 2021-04-26). If to ≤ Floor(from) the result is the
// single boundary Floor(from) (no bucket). The returned slice is newly
// allocated and owned by the caller. A nil loc means UTC. It panics on an
// invalid iv. Bounds has no limit: code serving queries uses BoundsMax.
func Bounds(from, to int64, iv Interval, loc *time.Location, ws WeekStart) []int64 {
	b, _ := BoundsMax(context.Background(), from, to, iv, loc, ws, math.MaxInt)
	return b
}

// TooManyError is the error of BoundsMax for a range of more than Max
// buckets.
type TooManyError struct {
	Count    int64 // Count's estimate of the buckets in the range; at least Max+1
	Max      int   // the limit passed to BoundsMax
	Interval Interval
}

func (e *TooManyError) Error() string {
	return fmt.Sprintf("timebucket: about %d %s buckets in the range; at most %d", e.Count, e.Interval, e.Max)
}

// BoundsMax is Bounds for at most limit buckets (len(B)-1 ≤ limit). A
// range of more returns a *TooManyError without building its buckets when
// Count says so (constant time, however long the range), or after
// building limit+1 boundaries when Count was close. The loop checks ctx
// before the first and every 1,024th boundary and returns ctx.Err() once
// it is done. The returned slice is newly allocated and owned by the
// caller.
func BoundsMax(ctx context.Context, from, to int64, iv Interval, loc *time.Location, ws WeekStart, limit int) ([]int64, error) {
	loc = orUTC(loc)
	n := Count(from, to, iv, loc, ws)
	if n-countSlack-n/countSlackShare > int64(limit) {
		return nil, &TooManyError{Count: n, Max: limit, Interval: iv}
	}
	b := floorSec(floorDiv(from, 1e6), iv, loc, ws)
	out := make([]int64, 1, min(n+countSlack, int64(limit))+1)
	out[0] = b * 1e6
	for b*1e6 < to {
		if len(out) > limit {
			return nil, &TooManyError{Count: max(n, int64(limit)+1), Max: limit, Interval: iv}
		}
		if len(out)%1024 == 1 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		b = nextSec(b, iv, loc, ws)
		out = append(out, b*1e6)
	}
	return out, nil
}

// Count returns about how many buckets [from, to) has (len(Bounds)-1),
// in constant time: the hours from Floor(from) to to, or the dates, weeks
// or months between their wall-clock readings. It is exact when no zone
// transition lies in the range, and for hours also across transitions by
// whole hours; each other transition moves it by at most its length in
// buckets plus one (a repeated or skipped local date, a 30-minute DST
// hour), far less than countSlack plus 1/countSlackShare of it over any
// range. It is 0 when to ≤ from. A nil loc means UTC.
func Count(from, to int64, iv Interval, loc *time.Location, ws WeekStart) int64 {
	if to <= from {
		return 0
	}
	loc = orUTC(loc)
	f := floorSec(floorDiv(from, 1e6), iv, loc, ws)
	t := -floorDiv(-to, 1e6)
	wf, wt := wallSec(f, loc), wallSec(t, loc)
	var n int64
	switch iv {
	case Hour:
		n = -floorDiv(f-t, 3600)
	case Day, Week:
		n = -floorDiv(floorDiv(wf, 86400)*86400-wt, 86400)
		if iv == Week {
			n = -floorDiv(-n, 7)
		}
	case Month:
		yf, mf, _ := time.Unix(wf, 0).UTC().Date()
		yt, mt, _ := time.Unix(wt, 0).UTC().Date()
		n = int64(yt-yf)*12 + int64(mt-mf)
		if wt > civil(yt, mt, 1) {
			n++
		}
	default:
		panic(fmt.Sprintf("timebucket: invalid interval %v", iv))
	}
	return max(n, 1)
}

// BoundsMax trusts Count to within countSlack buckets plus one in
// countSlackShare: a range Count puts beyond that is refused unbuilt.
const (
	countSlack      = 64
	countSlackShare = 64
)

// DateStart returns the first instant (UTC microseconds) of the local date
// y-m-d in loc: local midnight, or the first instant after it where
// midnight does not exist (docs/analytics.md §2: a date in a range means local
// midnight). The date is normalised like time.Date's (day 0 is the last
// day of the previous month). For a date the zone skips entirely
// (Pacific/Apia 2011-12-30) it is the first instant of the next date. A
// nil loc means UTC.
func DateStart(y int, m time.Month, d int, loc *time.Location) int64 {
	return firstInstant(civil(y, m, d), orUTC(loc)) * 1e6
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

// Zone periods are found from UTC offsets alone (time.Time.Zone), never
// from time.Time.ZoneBounds: Go computes the bounds of a period ruled by a
// zone's TZ string (after its last listed transition; 2037 in "fat" tz
// data) as if every year had 365 days, so that in leap years such as 2040
// a period may "end" before the instant asked about, and a walk over
// periods never advances (issue #16). Offsets themselves are right.

// maxOffsetSec bounds the absolute UTC offset of any zone in the tz
// database (the largest, local mean times such as Asia/Manila's −15:56
// and +14:00, are below 16 hours; TestZoneData checks every zone).
const maxOffsetSec = 16 * 3600

// probeStep is the distance in seconds between the offset probes that
// look for a change of a zone's UTC offset. It is shorter than the
// shortest time any zone keeps an offset (95 h 40 min, Africa/Freetown in
// September 1939; TestZoneData checks every zone of the host's tz
// database), so between two probes the offset changes at most once and a
// binary search finds the change to the second. It is also longer than the
// widest window a bucket boundary needs (2 × maxOffsetSec), so the common
// case costs one probe.
const probeStep = 48 * 3600

// offsetAt returns the UTC offset in seconds of zone loc at instant sec
// (Unix seconds).
func offsetAt(sec int64, loc *time.Location) int64 {
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return int64(off)
}

// wallSec returns the local wall-clock reading of instant sec as seconds
// since 1970-01-01T00:00:00 of the wall clock.
func wallSec(sec int64, loc *time.Location) int64 {
	return sec + offsetAt(sec, loc)
}

// nextChange returns the first instant in (lo, hi] whose UTC offset
// differs from lo's, and false when the offset is lo's throughout. It
// probes every probeStep seconds and bisects the first probe whose offset
// differs.
func nextChange(lo, hi int64, loc *time.Location) (int64, bool) {
	o := offsetAt(lo, loc)
	for lo < hi {
		p := min(lo+probeStep, hi)
		if offsetAt(p, loc) != o {
			for p-lo > 1 { // offset(lo) = o ≠ offset(p)
				mid := lo + (p-lo)/2
				if offsetAt(mid, loc) != o {
					p = mid
				} else {
					lo = mid
				}
			}
			return p, true
		}
		lo = p
	}
	return 0, false
}

// periodStart returns the first instant s in (lo, hi] such that the UTC
// offset is hi's throughout [s, hi], and false when it is hi's throughout
// [lo, hi] (the period holding hi started at or before lo).
func periodStart(lo, hi int64, loc *time.Location) (int64, bool) {
	o := offsetAt(hi, loc)
	for hi > lo {
		p := max(hi-probeStep, lo)
		if offsetAt(p, loc) != o {
			for hi-p > 1 { // offset(p) ≠ o = offset(hi)
				mid := p + (hi-p)/2
				if offsetAt(mid, loc) == o {
					hi = mid
				} else {
					p = mid
				}
			}
			return hi, true
		}
		hi = p
	}
	return 0, false
}

// firstInstant returns the earliest instant (Unix seconds) whose wall-clock
// reading is ≥ w: the first instant of a local date when w is its midnight.
// It walks the zone's periods forward from an instant whose wall clock is
// certainly before w; in each period [u, end) of offset o the candidate is
// the instant reading w (w − o), or u itself when the period starts past w
// (a gap). Every step moves u forward to a later period start, within
// 2 × maxOffsetSec, so the loop ends.
func firstInstant(w int64, loc *time.Location) int64 {
	u := w - maxOffsetSec - 1
	for {
		cand := max(u, w-offsetAt(u, loc))
		c, changed := nextChange(u, cand, loc)
		if !changed {
			return cand
		}
		u = c
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

// nextSec returns the first boundary strictly after sec: every bucket loop
// built on it advances.
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
		c := sec - mod(sec+offsetAt(sec, loc), 3600)
		s, changed := periodStart(c, sec, loc)
		if !changed {
			return c
		}
		sec = s - 1
	}
}

// nextHour returns the earliest instant > sec at which the wall clock
// reads a whole hour, walking zone periods forwards.
func nextHour(sec int64, loc *time.Location) int64 {
	u := sec + 1
	for {
		c := u + mod(-(u+offsetAt(u, loc)), 3600)
		n, changed := nextChange(u, c, loc)
		if !changed {
			return c
		}
		u = n
	}
}
