package event

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("time zone %s not available: %v", name, err)
	}
	return loc
}

func us(t time.Time) int64 { return t.UnixMicro() }

func TestParseTimeForms(t *testing.T) {
	base := time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want int64
	}{
		{"2019-10-01T00:00:00Z", us(base)},
		{"2019-10-01t00:00:00z", us(base)},
		{"2019-10-01 00:00:00Z", us(base)},
		{"2019-10-01T09:00:00+09:00", us(base)},
		{"2019-10-01T09:00:00+0900", us(base)},
		{"2019-09-30T19:30:00-04:30", us(base)},
		{"2019-10-01T05:45:00+05:45", us(base)},
		// ISO 8601 offsets ±hh and ±hhmm (PostgreSQL and DuckDB write ±hh).
		{"2019-10-01 09:00:00+09", us(base)},
		{"2019-10-01T00:00:00+00", us(base)},
		{"2019-09-30 19:00:00-05", us(base)},
		{"2019-10-01 00:00:00.5+00", us(base) + 500000},
		{"2024-02-23 13:49:26.513+00", us(time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC))},
		{"2024-02-23 13:49:26.513+00:00", us(time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC))},
		{"2024-02-23 13:49:26.513+0000", us(time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC))},
		{"2024-02-23 19:19:26.513+0530", us(time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC))},
		{"2024-02-23 19:19:26.513+05:30", us(time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC))},
		{"2024-02-23 08:49:26.513-05", us(time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC))},
		{"2019-10-01T00:00:00+00:00", us(base)},
		{"2019-10-01T00:00:00-00:00", us(base)},
		{"2019-10-01T00:00:00", us(base)},
		{"2019-10-01 00:00:00", us(base)},
		{"2019-10-01 00:00:00 UTC", us(base)},
		{"2019-10-01", us(base)},
		{"2019-10-01 00:00:00.5", us(base) + 500000},
		{"2019-10-01 00:00:00.123456", us(base) + 123456},
		{"2019-10-01T00:00:00.123456789Z", us(base) + 123456},
		{"2019-10-01T00:00:00.1234567891234Z", us(base) + 123456},
		{"2019-10-01T00:00:00.000001+01:00", us(base) - 3600e6 + 1},
		{"2019-10-01 00:00:00.25 UTC", us(base) + 250000},
		{"2021-04-27T14:50:43.050Z", us(time.Date(2021, 4, 27, 14, 50, 43, 50e6, time.UTC))},
		{"2020-02-29", us(time.Date(2020, 2, 29, 0, 0, 0, 0, time.UTC))},
		{"2000-02-29T23:59:59Z", us(time.Date(2000, 2, 29, 23, 59, 59, 0, time.UTC))},
		{"0000-01-01T00:00:00Z", us(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC))},
		{"9999-12-31T23:59:59.999999Z", us(time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC))},
		{"1969-12-31T23:59:59.999999Z", -1},
		{"1900-03-01", us(time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC))},
		// Epoch numbers: seconds < 1e11, ms < 1e14, µs otherwise.
		{"1569888000", us(base)},
		{"1569888000.5", us(base) + 500000},
		{"1569888000.1234567", us(base) + 123456},
		{"1569888000000", us(base)},
		{"1569888000000.5", us(base) + 500},
		{"1569888000000000", us(base)},
		{"1569888000000000.9", us(base)},
		{"0", 0},
		{"99999999999", 99999999999e6},
		{"100000000000", 100000000000e3},
		{"99999999999999", 99999999999999e3},
		{"100000000000000", 100000000000000},
		{"-1", -1e6},
		{"-1.5", -1500000},
		{"-0.0000005", -1},
		{"-1569888000000", -us(base)},
		{"253402300799999999", MaxTime},
		{"-62167219200", MinTime},
		{"-62167219200000000", MinTime},
		{"20191001", 20191001e6},
	}
	for _, tc := range tests {
		got, err := ParseTime(tc.in, nil)
		if err != nil {
			t.Errorf("ParseTime(%q): %v", tc.in, err)
			continue
		}
		if got != tc.want {
			t.Errorf("ParseTime(%q) = %d (%s), want %d (%s)", tc.in, got, Time(got), tc.want, Time(tc.want))
		}
	}
}

func TestParseTimeLocation(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	ny := mustLoc(t, "America/New_York")
	tests := []struct {
		in   string
		loc  *time.Location
		want time.Time
	}{
		{"2019-10-01 09:00:00", tokyo, time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC)},
		{"2019-10-01", tokyo, time.Date(2019, 9, 30, 15, 0, 0, 0, time.UTC)},
		{"2019-10-01T09:00:00.25", tokyo, time.Date(2019, 10, 1, 0, 0, 0, 250e6, time.UTC)},
		// An explicit offset or UTC wins over loc.
		{"2019-10-01T00:00:00Z", tokyo, time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC)},
		{"2019-10-01 00:00:00 UTC", tokyo, time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC)},
		{"2019-10-01T00:00:00+02:00", ny, time.Date(2019, 9, 30, 22, 0, 0, 0, time.UTC)},
		// Epoch numbers are instants: loc does not apply.
		{"1569888000", tokyo, time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC)},
		// DST: summer (EDT, -4) and winter (EST, -5).
		{"2021-07-01 12:00:00", ny, time.Date(2021, 7, 1, 16, 0, 0, 0, time.UTC)},
		{"2021-01-01 12:00:00", ny, time.Date(2021, 1, 1, 17, 0, 0, 0, time.UTC)},
		{"2021-03-14", ny, time.Date(2021, 3, 14, 5, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		got, err := ParseTime(tc.in, tc.loc)
		if err != nil {
			t.Errorf("ParseTime(%q, %s): %v", tc.in, tc.loc, err)
			continue
		}
		if got != tc.want.UnixMicro() {
			t.Errorf("ParseTime(%q, %s) = %s, want %s", tc.in, tc.loc, Time(got), tc.want.UTC().Format(time.RFC3339Nano))
		}
	}
}

func TestParseTimeErrors(t *testing.T) {
	tests := []struct{ in, reason string }{
		{"", ""},
		{"2021-13-01", "month out of range"},
		{"2021-00-01", "month out of range"},
		{"2021-02-29", "day out of range"},
		{"1900-02-29", "day out of range"},
		{"2021-04-31", "day out of range"},
		{"2021-01-00", "day out of range"},
		{"2021-01-32", "day out of range"},
		{"2021-01-01T24:00:00Z", "hour out of range"},
		{"2021-01-01T23:60:00Z", "minute out of range"},
		{"2021-01-01T23:59:60Z", "second out of range"},
		{"2021-01-01T00:00:00+24:00", "bad UTC offset"},
		{"2021-01-01T00:00:00+01:60", "bad UTC offset"},
		{"2021-01-01T00:00:00+1", "bad UTC offset"},
		{"2021-01-01T00:00:00+123", "bad UTC offset"},
		{"2021-01-01T00:00:00+24", "bad UTC offset"},
		{"2021-01-01T00:00:00+0x", "bad UTC offset"},
		{"2021-01-01T00:00:00 +00", "bad UTC offset"},
		{"2021-01-01T00:00:00*00", "bad UTC offset"},
		{"2021-01-01T00:00:00+00:0", "bad UTC offset"},
		{"2021-01-01T00:00:00 utc", "bad UTC offset"},
		{"2021-01-01T00:00:00 GMT", "bad UTC offset"},
		{"2021-01-01T00:00:00.Z", ""},
		{"2021-01-01T00:00Z", ""},
		{"2021-01-01T00:00", ""},
		{"2021-1-01", ""},
		{"2021/01/01", ""},
		{"21-01-01", ""},
		{"2021-01-01x", ""},
		{"2021-01-01 ", ""},
		{" 2021-01-01", ""},
		{"abc", ""},
		{"-", ""},
		{"1.", ""},
		{".5", ""},
		{"1.5e9", ""},
		{"+15", ""},
		{"1_000", ""},
		{"9223372036854775807", "out of range (years 0000-9999 UTC)"},
		{"9223372036854775808", "epoch number out of range"},
		{"99999999999999999999", "epoch number out of range"},
		{"1659304800025000000", "out of range"}, // nanoseconds
		{"253402300800000000", "out of range"},
		{"-62167219200000001", "out of range"},
		{"-62167219201", "out of range"},
		{"0000-01-01T00:00:00+00:01", "out of range"},
		{"9999-12-31T23:59:59-00:01", "out of range"},
	}
	for _, tc := range tests {
		_, err := ParseTime(tc.in, nil)
		if err == nil {
			t.Errorf("ParseTime(%q): no error", tc.in)
			continue
		}
		if !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("ParseTime(%q): error %v does not wrap ErrInvalidTimestamp", tc.in, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, `want RFC 3339, "YYYY-MM-DD HH:MM:SS[.ffffff][±hh[:mm]]", "... UTC" or Unix epoch seconds/ms/µs`) {
			t.Errorf("ParseTime(%q): error %q does not list the accepted forms", tc.in, msg)
		}
		if tc.reason != "" && !strings.Contains(msg, tc.reason) {
			t.Errorf("ParseTime(%q): error %q does not say %q", tc.in, msg, tc.reason)
		}
	}
	_, err := ParseTime("2021-13-01", nil)
	want := `invalid timestamp "2021-13-01": month out of range; want RFC 3339, "YYYY-MM-DD HH:MM:SS[.ffffff][±hh[:mm]]", "... UTC" or Unix epoch seconds/ms/µs`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
	_, err = ParseTime(strings.Repeat("x", 1000), nil)
	if err == nil || len(err.Error()) > 200 {
		t.Errorf("long input: error %v not truncated", err)
	}
}

// TestParseTimeDifferential checks the hand-written parser against
// time.Parse over random instants and layouts.
func TestParseTimeDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	layouts := []string{
		time.RFC3339Nano,
		"2006-01-02T15:04:05.000000Z07:00",
		"2006-01-02 15:04:05Z07:00",
		"2006-01-02T15:04:05-0700",
		"2006-01-02 15:04:05.999999-07", // PostgreSQL's and DuckDB's text form
	}
	for range 20000 {
		sec := rng.Int64N(253402300800+62135596800) - 62135596800 // years 0001–9999
		ns := rng.Int64N(1e9)
		off := (rng.IntN(48) - 24) * 1800
		layout := layouts[rng.IntN(len(layouts))]
		if strings.HasSuffix(layout, "-07") {
			off -= off % 3600 // ±hh: whole hours
		}
		zone := time.FixedZone("", off)
		tm := time.Unix(sec, ns).In(zone)
		s := tm.Format(layout)
		got, err := ParseTime(s, nil)
		if err != nil {
			t.Fatalf("ParseTime(%q): %v", s, err)
		}
		ref, err := time.Parse(layout, s)
		if err != nil {
			t.Fatalf("time.Parse(%q): %v", s, err)
		}
		want := ref.Unix()*1e6 + int64(ref.Nanosecond()/1000)
		if got != want {
			t.Fatalf("ParseTime(%q) = %d, want %d", s, got, want)
		}
		// The same wall clock without offset, read in the zone.
		wall := tm.Format("2006-01-02 15:04:05.999999")
		got, err = ParseTime(wall, zone)
		if err != nil {
			t.Fatalf("ParseTime(%q): %v", wall, err)
		}
		if got != tm.Truncate(time.Microsecond).UnixMicro() {
			t.Fatalf("ParseTime(%q, %s) = %d, want %d", wall, zone, got, tm.UnixMicro())
		}
	}
}

func TestEpochToMicros(t *testing.T) {
	tests := []struct{ in, want int64 }{
		{0, 0},
		{1569888000, 1569888000e6},
		{-1569888000, -1569888000e6},
		{99999999999, 99999999999e6},
		{1e11, 1e14},
		{-1e11, -1e14},
		{99999999999999, 99999999999999e3},
		{1e14, 1e14},
		{1569888000000000, 1569888000000000},
		{MaxTime, MaxTime},
		{MinTime, MinTime},
	}
	for _, tc := range tests {
		if got, err := EpochToMicros(tc.in); err != nil || got != tc.want {
			t.Errorf("EpochToMicros(%d) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []int64{MaxTime + 1, MinTime - 1, math.MaxInt64, math.MinInt64, 1659304800025000000} {
		if _, err := EpochToMicros(bad); !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("EpochToMicros(%d): error %v, want ErrInvalidTimestamp", bad, err)
		}
	}
}

func TestEpochFloatToMicros(t *testing.T) {
	tests := []struct {
		in   float64
		want int64
	}{
		{1569888000.5, 1569888000500000},
		{1569888000000.25, 1569888000000250},
		{1569888000000000, 1569888000000000},
		{-1.5, -1500000},
		{-0.0000005, -1},
		{0, 0},
	}
	for _, tc := range tests {
		got, err := EpochFloatToMicros(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("EpochFloatToMicros(%v) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e19, -1e19, math.MaxFloat64, 1.6593048e18} {
		if _, err := EpochFloatToMicros(bad); !errors.Is(err, ErrInvalidTimestamp) {
			t.Errorf("EpochFloatToMicros(%v): error %v, want ErrInvalidTimestamp", bad, err)
		}
	}
}

func TestParseTimeAllocs(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	for _, s := range []string{"2019-10-01T00:00:00.123456Z", "2019-10-01 00:00:00 UTC", "2019-10-01 00:00:00", "1569888000000", "2019-10-01"} {
		for _, loc := range []*time.Location{nil, tokyo} {
			n := testing.AllocsPerRun(100, func() {
				if _, err := ParseTime(s, loc); err != nil {
					t.Fatal(err)
				}
			})
			if n != 0 {
				t.Errorf("ParseTime(%q, %v): %v allocs, want 0", s, loc, n)
			}
		}
	}
}

func FuzzParseTime(f *testing.F) {
	for _, s := range []string{
		"2019-10-01T00:00:00Z", "2019-10-01T09:00:00+09:00", "2019-10-01 00:00:00.123456",
		"2019-10-01 00:00:00 UTC", "2019-10-01", "1569888000", "1569888000000.5", "-1.5",
		"2021-13-01", "9223372036854775807", "2019-10-01T00:00:00.123456789-0130",
		"2024-02-23 13:49:26.513+00", "2024-02-23 13:49:26-05",
	} {
		f.Add(s)
	}
	tokyo := time.FixedZone("JST", 9*3600)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTime(s, nil)
		if err != nil {
			if !errors.Is(err, ErrInvalidTimestamp) {
				t.Fatalf("error %v does not wrap ErrInvalidTimestamp", err)
			}
			return
		}
		// Cross-check the date-time forms with an offset against time.Parse.
		if len(s) > 19 && s[4] == '-' && strings.ContainsAny(s[19:], "Zz+-") && !strings.ContainsAny(s, "tz") {
			norm := strings.Replace(s, " ", "T", 1)
			if ref, perr := time.Parse(time.RFC3339Nano, norm); perr == nil {
				want := ref.Unix()*1e6 + int64(ref.Nanosecond()/1000)
				if got != want {
					t.Fatalf("ParseTime(%q) = %d, time.Parse says %d", s, got, want)
				}
			}
		}
		// A wall clock read in a fixed zone is shifted by exactly its offset.
		if isWallClock(s) {
			inTokyo, err := ParseTime(s, tokyo)
			if want := got - 9*3600e6; want < MinTime {
				if err == nil {
					t.Fatalf("ParseTime(%q, JST) = %d, want out of range", s, inTokyo)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTime(%q, JST): %v (UTC parse succeeded)", s, err)
			}
			if inTokyo != got-9*3600e6 {
				t.Fatalf("ParseTime(%q, JST) = %d, want %d", s, inTokyo, got-9*3600e6)
			}
		}
	})
}

// isWallClock reports whether s, a string ParseTime accepted, is a
// date-time form without an offset (read in the given location).
func isWallClock(s string) bool {
	if len(s) < 10 || s[4] != '-' {
		return false // epoch number
	}
	i := min(len(s), 19)
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}

func BenchmarkParseTime(b *testing.B) {
	for _, s := range []string{"2019-10-01T00:00:00.123Z", "2019-10-01 00:00:00 UTC", "2019-10-01T09:00:00+09:00", "1659304800025"} {
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseTime(s, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("time.Parse/RFC3339Nano", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := time.Parse(time.RFC3339Nano, "2019-10-01T00:00:00.123Z"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestParseDateTime(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	for _, tc := range []struct {
		in   string
		loc  *time.Location
		want time.Time
	}{
		{"2024-02-23", berlin, time.Date(2024, 2, 22, 23, 0, 0, 0, time.UTC)},
		{"2024-02-23T10:00:00", berlin, time.Date(2024, 2, 23, 9, 0, 0, 0, time.UTC)},
		{"2024-02-23 13:49:26.513+00", berlin, time.Date(2024, 2, 23, 13, 49, 26, 513e6, time.UTC)},
		{"2024-02-23T13:49:26+0100", nil, time.Date(2024, 2, 23, 12, 49, 26, 0, time.UTC)},
		{"2040-12-31", berlin, time.Date(2040, 12, 30, 23, 0, 0, 0, time.UTC)},
	} {
		got, err := ParseDateTime(tc.in, tc.loc)
		if err != nil || got != tc.want.UnixMicro() {
			t.Errorf("ParseDateTime(%q, %v) = %s, %v; want %s", tc.in, tc.loc, Time(got), err, tc.want.Format(time.RFC3339Nano))
		}
	}
	for _, bad := range []string{"1569888000", "0", "", "2024-02-30", "2024-02-23T10:00:00+1"} {
		_, err := ParseDateTime(bad, nil)
		if !errors.Is(err, ErrInvalidTimestamp) || !strings.Contains(err.Error(), "want a date") {
			t.Errorf("ParseDateTime(%q): error %v, want ErrInvalidTimestamp listing the date forms", bad, err)
		}
	}
}
