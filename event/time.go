package event

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrInvalidTimestamp is matched (errors.Is) by every error of ParseTime,
// EpochToMicros and EpochFloatToMicros.
var ErrInvalidTimestamp = errors.New("invalid timestamp")

// timeWant is the list of accepted forms quoted in every timestamp error.
const timeWant = `want RFC 3339, "YYYY-MM-DD HH:MM:SS[.ffffff][±hh[:mm]]", "... UTC" or Unix epoch seconds/ms/µs`

// Epoch magnitude thresholds of docs/analytics.md §1: a Unix epoch number n is seconds
// when |n| < EpochMillisFrom, milliseconds when |n| < EpochMicrosFrom and
// microseconds otherwise. 1e11 s is the year 5138; 1e14 ms is the year 5138.
const (
	EpochMillisFrom = 1e11
	EpochMicrosFrom = 1e14
)

// ParseTime parses an input timestamp (docs/analytics.md §1) and returns it as UTC
// microseconds since the Unix epoch. The accepted forms are:
//
//   - RFC 3339 with an offset: "2019-10-01T00:00:00Z", "2019-10-01T09:00:00+09:00",
//     and the other ISO 8601 offsets "+0900" and "+09" (PostgreSQL's and
//     DuckDB's text form "2024-02-23 13:49:26.513+00"); also a lower-case
//     "t"/"z", or a space instead of "T";
//   - the same without an offset, and "YYYY-MM-DD HH:MM:SS[.ffffff]": wall
//     clock time in loc (nil means UTC);
//   - the REES46 form "2019-10-01 00:00:00 UTC";
//   - a bare date "YYYY-MM-DD": midnight in loc;
//   - a Unix epoch number written as a string, optionally negative and with
//     a fraction ("1569888000", "1569888000.5", "1569888000000"): seconds
//     when |n| < 1e11, milliseconds when |n| < 1e14, microseconds otherwise.
//
// Fractional seconds may have any number of digits; digits beyond the
// microsecond are truncated towards the past (floor). Years are 0000–9999
// for every form, epoch numbers included ([MinTime, MaxTime]);
// months, days (with leap years), hours 00–23, minutes, seconds 00–59 (no
// leap second) and offsets up to ±23:59 are range-checked. Surrounding
// whitespace is not accepted. Epoch exponents ("1.5e9") are not accepted.
//
// The fixed-width forms are parsed by hand without allocating; only a wall
// clock time in a loc other than UTC goes through time.Date. A wall clock
// time inside a daylight-saving gap or overlap is resolved as time.Date does.
//
// The error wraps ErrInvalidTimestamp, quotes the input briefly (Quote)
// and lists the accepted forms.
func ParseTime(s string, loc *time.Location) (int64, error) {
	us, reason := parseTime(s, loc)
	if reason != "" {
		return 0, timeError(s, reason)
	}
	return us, nil
}

// dateTimeWant lists the forms of ParseDateTime in its errors.
const dateTimeWant = `want a date YYYY-MM-DD or a date-time "YYYY-MM-DD[T| ]HH:MM:SS[.ffffff]" with an optional offset (Z, ±hh, ±hhmm, ±hh:mm)`

// ParseDateTime parses the date and date-time forms of ParseTime — a date
// (midnight in loc), a date-time with or without an offset (without: wall
// clock in loc; nil means UTC), the REES46 form — but not epoch numbers,
// which are ambiguous where a person writes a time (a query's range). It
// returns UTC microseconds. The error wraps ErrInvalidTimestamp, quotes
// the input briefly and lists the accepted forms.
func ParseDateTime(s string, loc *time.Location) (int64, error) {
	if len(s) < 10 || s[4] != '-' {
		return 0, fmt.Errorf("%w %s: %s", ErrInvalidTimestamp, Quote(s), dateTimeWant)
	}
	us, reason := parseTime(s, loc)
	if reason == reasonSyntax {
		return 0, fmt.Errorf("%w %s: %s", ErrInvalidTimestamp, Quote(s), dateTimeWant)
	}
	if reason != "" {
		return 0, fmt.Errorf("%w %s: %s; %s", ErrInvalidTimestamp, Quote(s), reason, dateTimeWant)
	}
	return us, nil
}

func timeError(s, reason string) error {
	if reason == reasonSyntax {
		return fmt.Errorf("%w %s: %s", ErrInvalidTimestamp, Quote(s), timeWant)
	}
	return fmt.Errorf("%w %s: %s; %s", ErrInvalidTimestamp, Quote(s), reason, timeWant)
}

const reasonSyntax = "syntax"

// parseTime returns the instant or a non-empty reason (reasonSyntax for an
// input that matches no form).
func parseTime(s string, loc *time.Location) (int64, string) {
	var us int64
	var reason string
	if len(s) >= 10 && s[4] == '-' {
		us, reason = parseDateTime(s, loc)
	} else {
		us, reason = parseEpoch(s)
	}
	if reason == "" && (us < MinTime || us > MaxTime) {
		return 0, "out of range (years 0000-9999 UTC)"
	}
	return us, reason
}

// digits2 returns the value of two ASCII digits at s[i:i+2], or -1.
func digits2(s string, i int) int {
	a, b := s[i]-'0', s[i+1]-'0'
	if a > 9 || b > 9 {
		return -1
	}
	return int(a)*10 + int(b)
}

func parseDateTime(s string, loc *time.Location) (int64, string) {
	y1, y2 := digits2(s, 0), digits2(s, 2)
	mo, d := digits2(s, 5), digits2(s, 8)
	if y1 < 0 || y2 < 0 || mo < 0 || d < 0 || s[7] != '-' {
		return 0, reasonSyntax
	}
	year := y1*100 + y2
	if mo < 1 || mo > 12 {
		return 0, "month out of range"
	}
	if d < 1 || d > daysIn(year, mo) {
		return 0, "day out of range"
	}
	var hh, mm, ss, frac int
	i := 10
	if len(s) > 10 {
		if len(s) < 19 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
			return 0, reasonSyntax
		}
		hh, mm, ss = digits2(s, 11), digits2(s, 14), digits2(s, 17)
		if hh < 0 || mm < 0 || ss < 0 {
			return 0, reasonSyntax
		}
		if hh > 23 {
			return 0, "hour out of range"
		}
		if mm > 59 {
			return 0, "minute out of range"
		}
		if ss > 59 {
			return 0, "second out of range"
		}
		i = 19
		if i < len(s) && s[i] == '.' {
			i++
			start := i
			for i < len(s) && s[i]-'0' <= 9 {
				if i-start < 6 {
					frac = frac*10 + int(s[i]-'0')
				}
				i++
			}
			if i == start {
				return 0, reasonSyntax
			}
			for n := i - start; n < 6; n++ {
				frac *= 10
			}
		}
	}
	days := daysFromCivil(year, mo, d)
	secs := days*86400 + int64(hh*3600+mm*60+ss)
	if i == len(s) { // no offset: wall clock in loc
		if loc == nil || loc == time.UTC {
			return secs*1e6 + int64(frac), ""
		}
		t := time.Date(year, time.Month(mo), d, hh, mm, ss, frac*1000, loc)
		return t.UnixMicro(), ""
	}
	off, ok := parseOffset(s[i:])
	if !ok {
		return 0, "bad UTC offset"
	}
	return (secs-int64(off))*1e6 + int64(frac), ""
}

// parseOffset parses "Z", "z", " UTC" or an ISO 8601 offset "±HH:MM",
// "±HHMM" or "±HH", and returns the offset east of UTC in seconds.
func parseOffset(z string) (int, bool) {
	switch z {
	case "Z", "z", " UTC":
		return 0, true
	}
	var h, m int
	switch {
	case len(z) == 6 && z[3] == ':':
		h, m = digits2(z, 1), digits2(z, 4)
	case len(z) == 5:
		h, m = digits2(z, 1), digits2(z, 3)
	case len(z) == 3:
		h = digits2(z, 1)
	default:
		return 0, false
	}
	if h < 0 || m < 0 || h > 23 || m > 59 {
		return 0, false
	}
	off := h*3600 + m*60
	switch z[0] {
	case '+':
		return off, true
	case '-':
		return -off, true
	}
	return 0, false
}

// daysIn returns the number of days of month mo (1–12) in the proleptic
// Gregorian year.
func daysIn(year, mo int) int {
	switch mo {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil returns the number of days from 1970-01-01 to the given
// proleptic Gregorian date. Algorithm: Howard Hinnant, "chrono-Compatible
// Low-Level Date Algorithms", days_from_civil.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}

// parseEpoch parses "[-]digits[.digits]" as an epoch number.
func parseEpoch(s string) (int64, string) {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	start := i
	var n uint64
	for i < len(s) && s[i]-'0' <= 9 {
		d := uint64(s[i] - '0')
		if i-start >= 18 && n > (math.MaxInt64-d)/10 { // 19+ digits: int64 overflow
			return 0, "epoch number out of range"
		}
		n = n*10 + d
		i++
	}
	if i == start {
		return 0, reasonSyntax
	}
	// Unit: scale to µs; fracDigits = how many fraction digits are µs digits.
	var mul int64
	var fracDigits int
	switch {
	case n < EpochMillisFrom:
		mul, fracDigits = 1e6, 6
	case n < EpochMicrosFrom:
		mul, fracDigits = 1e3, 3
	default:
		mul, fracDigits = 1, 0
	}
	us := int64(n) * mul
	var frac int64
	rest := false // nonzero digits beyond µs precision
	if i < len(s) {
		if s[i] != '.' {
			return 0, reasonSyntax
		}
		i++
		fs := i
		for i < len(s) && s[i]-'0' <= 9 {
			dg := int64(s[i] - '0')
			if i-fs < fracDigits {
				frac = frac*10 + dg
			} else if dg != 0 {
				rest = true
			}
			i++
		}
		if i == fs || i != len(s) {
			return 0, reasonSyntax
		}
		for k := i - fs; k < fracDigits; k++ {
			frac *= 10
		}
	}
	us += frac
	if neg {
		us = -us
		if rest {
			us-- // floor, as for the fraction of a date-time
		}
	}
	return us, ""
}

// The range of instants Spur accepts, in UTC microseconds: years 0000 to
// 9999, the range of the date-time forms of ParseTime. Epoch numbers
// outside it (for example nanoseconds, which the magnitude rule reads as
// microseconds) are rejected instead of landing in the year 50000.
const (
	MinTime int64 = -62167219200_000000 // 0000-01-01T00:00:00Z
	MaxTime int64 = 253402300799_999999 // 9999-12-31T23:59:59.999999Z
)

// EpochToMicros converts a Unix epoch number to UTC microseconds by the
// magnitude rule of docs/analytics.md §1: seconds when |n| < 1e11, milliseconds when
// |n| < 1e14, microseconds otherwise. It returns an error wrapping
// ErrInvalidTimestamp when the result is outside [MinTime, MaxTime].
func EpochToMicros(n int64) (int64, error) {
	us := n
	switch {
	case n > -EpochMillisFrom && n < EpochMillisFrom:
		us = n * 1e6
	case n > -EpochMicrosFrom && n < EpochMicrosFrom:
		us = n * 1e3
	}
	if us < MinTime || us > MaxTime {
		return 0, fmt.Errorf("%w %d: epoch number out of range (years 0000-9999)", ErrInvalidTimestamp, n)
	}
	return us, nil
}

// EpochFloatToMicros converts a fractional Unix epoch number (for example a
// JSON number 1569888000.5 or a Parquet DOUBLE) to UTC microseconds by the
// magnitude rule of EpochToMicros, flooring below the microsecond. It
// returns an error wrapping ErrInvalidTimestamp for NaN, ±Inf and results
// outside [MinTime, MaxTime].
func EpochFloatToMicros(f float64) (int64, error) {
	a := math.Abs(f)
	us := f
	switch {
	case a < EpochMillisFrom:
		us = f * 1e6
	case a < EpochMicrosFrom:
		us = f * 1e3
	}
	us = math.Floor(us)
	if !(us >= float64(MinTime) && us <= float64(MaxTime)) { // also NaN
		return 0, fmt.Errorf("%w %v: epoch number out of range (years 0000-9999)", ErrInvalidTimestamp, f)
	}
	return int64(us), nil
}
