package timebucket

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	_ "time/tzdata" // hermetic zone data when the host has none

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

func mustTime(t testing.TB, s string) int64 {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v.UnixMicro()
}

func render(bounds []int64, loc *time.Location) string {
	parts := make([]string, len(bounds))
	for i, b := range bounds {
		parts[i] = time.UnixMicro(b).In(loc).Format(time.RFC3339)
	}
	return strings.Join(parts, " ")
}

// TestBoundsGolden checks hand-computed boundary lists, including DST days
// (23 h and 25 h), weeks starting Monday and Sunday, months, hours in
// fractional and DST zones, and zones whose local midnight is missing or
// repeated.
func TestBoundsGolden(t *testing.T) {
	cases := []struct {
		name     string
		zone     string
		iv       Interval
		ws       WeekStart
		from, to string
		want     string
	}{
		{"berlin spring 23h day", "Europe/Berlin", Day, Monday,
			"2021-03-27T00:00:00+01:00", "2021-03-30T00:00:00+02:00",
			"2021-03-27T00:00:00+01:00 2021-03-28T00:00:00+01:00 2021-03-29T00:00:00+02:00 2021-03-30T00:00:00+02:00"},
		{"berlin autumn 25h day", "Europe/Berlin", Day, Monday,
			"2021-10-31T12:00:00+01:00", "2021-11-01T00:00:00+01:00",
			"2021-10-31T00:00:00+02:00 2021-11-01T00:00:00+01:00"},
		{"new york spring and autumn days", "America/New_York", Day, Monday,
			"2021-03-14T05:00:00Z", "2021-03-14T06:00:00Z",
			"2021-03-14T00:00:00-05:00 2021-03-15T00:00:00-04:00"},
		{"new york 25h day", "America/New_York", Day, Monday,
			"2021-11-07T23:59:59-05:00", "2021-11-08T00:00:00-05:00",
			"2021-11-07T00:00:00-04:00 2021-11-08T00:00:00-05:00"},
		{"new york fall-back hours: repeated 01:00 is two buckets", "America/New_York", Hour, Monday,
			"2021-11-07T00:30:00-04:00", "2021-11-07T02:00:00-05:00",
			"2021-11-07T00:00:00-04:00 2021-11-07T01:00:00-04:00 2021-11-07T01:00:00-05:00 2021-11-07T02:00:00-05:00"},
		{"new york spring hours: 02:00 missing", "America/New_York", Hour, Monday,
			"2021-03-14T01:00:00-05:00", "2021-03-14T04:00:00-04:00",
			"2021-03-14T01:00:00-05:00 2021-03-14T03:00:00-04:00 2021-03-14T04:00:00-04:00"},
		{"kolkata hours start at hh:30 UTC", "Asia/Kolkata", Hour, Monday,
			"2021-01-01T00:00:00Z", "2021-01-01T01:30:00Z",
			"2021-01-01T05:00:00+05:30 2021-01-01T06:00:00+05:30 2021-01-01T07:00:00+05:30"},
		{"kolkata days", "Asia/Kolkata", Day, Monday,
			"2021-01-01T00:00:00Z", "2021-01-02T00:00:00Z",
			"2021-01-01T00:00:00+05:30 2021-01-02T00:00:00+05:30 2021-01-03T00:00:00+05:30"},
		{"week monday, range starting saturday", "UTC", Week, Monday,
			"2021-05-01T00:00:00Z", "2021-05-17T00:00:00Z",
			"2021-04-26T00:00:00Z 2021-05-03T00:00:00Z 2021-05-10T00:00:00Z 2021-05-17T00:00:00Z"},
		{"week sunday, range starting saturday", "UTC", Week, Sunday,
			"2021-05-01T00:00:00Z", "2021-05-10T00:00:00Z",
			"2021-04-25T00:00:00Z 2021-05-02T00:00:00Z 2021-05-09T00:00:00Z 2021-05-16T00:00:00Z"},
		{"week across berlin DST is 167h", "Europe/Berlin", Week, Monday,
			"2021-03-24T00:00:00+01:00", "2021-03-29T00:00:00+02:00",
			"2021-03-22T00:00:00+01:00 2021-03-29T00:00:00+02:00"},
		{"months", "Europe/Berlin", Month, Monday,
			"2021-01-15T00:00:00+01:00", "2021-04-01T00:00:00+02:00",
			"2021-01-01T00:00:00+01:00 2021-02-01T00:00:00+01:00 2021-03-01T00:00:00+01:00 2021-04-01T00:00:00+02:00"},
		{"leap february", "UTC", Month, Monday,
			"2024-02-10T00:00:00Z", "2024-03-01T00:00:01Z",
			"2024-02-01T00:00:00Z 2024-03-01T00:00:00Z 2024-04-01T00:00:00Z"},
		{"sao paulo: no midnight, day starts 01:00", "America/Sao_Paulo", Day, Monday,
			"2015-10-17T12:00:00-03:00", "2015-10-18T12:00:00-02:00",
			"2015-10-17T00:00:00-03:00 2015-10-18T01:00:00-02:00 2015-10-19T00:00:00-02:00"},
		{"sao paulo: fall back at midnight makes a 25h day", "America/Sao_Paulo", Day, Monday,
			"2016-02-20T12:00:00-02:00", "2016-02-21T00:00:00-03:00",
			"2016-02-20T00:00:00-02:00 2016-02-21T00:00:00-03:00"},
		{"havana: midnight repeated, day starts at the first", "America/Havana", Day, Monday,
			"2011-11-13T00:30:00-05:00", "2011-11-13T01:00:00-05:00",
			"2011-11-13T00:00:00-04:00 2011-11-14T00:00:00-05:00"},
		{"apia: 2011-12-30 skipped", "Pacific/Apia", Day, Monday,
			"2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00",
			"2011-12-29T00:00:00-10:00 2011-12-31T00:00:00+14:00 2012-01-01T00:00:00+14:00"},
		{"lord howe half-hour spring forward", "Australia/Lord_Howe", Hour, Monday,
			"2021-10-03T01:10:00+10:30", "2021-10-03T03:00:00+11:00",
			"2021-10-03T01:00:00+10:30 2021-10-03T03:00:00+11:00"},
		{"lord howe half-hour fall back", "Australia/Lord_Howe", Hour, Monday,
			"2021-04-04T01:45:00+10:30", "2021-04-04T02:00:01+10:30",
			"2021-04-04T01:00:00+11:00 2021-04-04T02:00:00+10:30 2021-04-04T03:00:00+10:30"},
		{"empty range", "UTC", Day, Monday,
			"2021-01-01T10:00:00Z", "2021-01-01T00:00:00Z",
			"2021-01-01T00:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loc := mustLoc(t, c.zone)
			got := render(Bounds(mustTime(t, c.from), mustTime(t, c.to), c.iv, loc, c.ws), loc)
			if got != c.want {
				t.Errorf("Bounds(%s, %s, %v)\n got %s\nwant %s", c.from, c.to, c.iv, got, c.want)
			}
		})
	}
}

func TestDayLengths(t *testing.T) {
	cases := []struct {
		zone, day string
		hours     float64
	}{
		{"Europe/Berlin", "2021-03-28T12:00:00+02:00", 23},
		{"Europe/Berlin", "2021-10-31T12:00:00+01:00", 25},
		{"America/New_York", "2021-03-14T12:00:00-04:00", 23},
		{"America/New_York", "2021-11-07T12:00:00-05:00", 25},
		{"America/New_York", "2021-06-01T12:00:00-04:00", 24},
		// After 2037 the zones' transitions come from their TZ strings.
		{"Europe/Berlin", "2040-03-25T12:00:00+02:00", 23},
		{"Europe/Berlin", "2040-10-28T12:00:00+01:00", 25},
		{"America/New_York", "2044-11-06T12:00:00-05:00", 25},
		{"Australia/Sydney", "2048-10-04T12:00:00+11:00", 23},
		{"Australia/Sydney", "2048-04-05T12:00:00+10:00", 25},
		{"Europe/Berlin", "2040-12-31T12:00:00+01:00", 24},
	}
	for _, c := range cases {
		loc := mustLoc(t, c.zone)
		b := Floor(mustTime(t, c.day), Day, loc, Monday)
		n := Next(b, Day, loc, Monday)
		if got := float64(n-b) / float64(HourMicros); got != c.hours {
			t.Errorf("%s %s: day is %vh, want %vh", c.zone, c.day, got, c.hours)
		}
	}
}

func TestFloorMicroseconds(t *testing.T) {
	loc := mustLoc(t, "Europe/Berlin")
	b := mustTime(t, "2021-03-28T00:00:00+01:00")
	for _, d := range []int64{0, 1, 999_999, 1_000_000} {
		if got := Floor(b+d, Day, loc, Monday); got != b {
			t.Errorf("Floor(b+%dµs) = %d, want %d", d, got, b)
		}
	}
	if got, want := Floor(b-1, Day, loc, Monday), mustTime(t, "2021-03-27T00:00:00+01:00"); got != want {
		t.Errorf("Floor(b-1µs) = %d, want %d", got, want)
	}
	if got := Next(b-1, Day, loc, Monday); got != b {
		t.Errorf("Next(b-1µs) = %d, want %d", got, b)
	}
	if got, want := Next(b, Day, loc, Monday), mustTime(t, "2021-03-29T00:00:00+02:00"); got != want {
		t.Errorf("Next(b) = %d, want %d", got, want)
	}
}

func TestExtend(t *testing.T) {
	loc := mustLoc(t, "America/New_York")
	b := Bounds(mustTime(t, "2021-11-05T10:00:00-04:00"), mustTime(t, "2021-11-06T10:00:00-04:00"), Day, loc, Monday)
	b = Extend(b, 2, Day, loc, Monday)
	want := "2021-11-05T00:00:00-04:00 2021-11-06T00:00:00-04:00 2021-11-07T00:00:00-04:00 2021-11-08T00:00:00-05:00 2021-11-09T00:00:00-05:00"
	if got := render(b, loc); got != want {
		t.Errorf("Extend\n got %s\nwant %s", got, want)
	}
}

func TestParse(t *testing.T) {
	for iv := Hour; iv <= Month; iv++ {
		got, err := ParseInterval(iv.String())
		if err != nil || got != iv {
			t.Errorf("ParseInterval(%q) = %v, %v", iv.String(), got, err)
		}
	}
	for _, bad := range []string{"", "Day", "days", "minute"} {
		if _, err := ParseInterval(bad); err == nil {
			t.Errorf("ParseInterval(%q) succeeded", bad)
		}
	}
	for _, c := range []struct {
		in   string
		want WeekStart
	}{{"", Monday}, {"monday", Monday}, {"sunday", Sunday}} {
		got, err := ParseWeekStart(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseWeekStart(%q) = %v, %v", c.in, got, err)
		}
	}
	if _, err := ParseWeekStart("Sunday"); err == nil {
		t.Error("ParseWeekStart(Sunday) succeeded")
	}
	if Interval(9).String() != "interval(9)" || WeekStart(7).String() != "weekstart(7)" {
		t.Error("String of invalid values")
	}
	if Day.Rolling() != 86400e6 || Week.Rolling() != 7*86400e6 || Month.Rolling() != 30*86400e6 || Hour.Rolling() != 3600e6 || Interval(0).Rolling() != 0 {
		t.Error("Rolling lengths")
	}
}

var propertyZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "America/Sao_Paulo",
	"Pacific/Apia", "Australia/Lord_Howe", "America/Havana", "Asia/Beirut",
	"Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns", "Africa/Casablanca",
}

// checkInvariants verifies that Floor and Next agree with each other and
// with the wall-clock definition of a bucket start.
func checkInvariants(t *testing.T, ts int64, iv Interval, loc *time.Location, ws WeekStart) {
	t.Helper()
	b := Floor(ts, iv, loc, ws)
	n := Next(b, iv, loc, ws)
	if b > ts || n <= ts {
		t.Fatalf("%s %v t=%d: Floor=%d Next=%d do not bracket t", loc, iv, ts, b, n)
	}
	if Floor(n, iv, loc, ws) != n || Floor(b, iv, loc, ws) != b {
		t.Fatalf("%s %v t=%d: boundaries are not fixed points of Floor", loc, iv, ts)
	}
	if Next(ts, iv, loc, ws) != n {
		t.Fatalf("%s %v t=%d: Next(t)=%d, want %d", loc, iv, ts, Next(ts, iv, loc, ws), n)
	}
	checkBoundary(t, b, iv, loc, ws)
}

func TestInvariantsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lo := mustTime(t, "1990-01-01T00:00:00Z")
	hi := mustTime(t, "2030-01-01T00:00:00Z")
	for _, z := range propertyZones {
		loc := mustLoc(t, z)
		for range 300 {
			ts := lo + r.Int64N(hi-lo)
			for iv := Hour; iv <= Month; iv++ {
				checkInvariants(t, ts, iv, loc, WeekStart(r.IntN(2)))
			}
		}
	}
}

// TestInvariantsAtTransitions probes every zone transition of the sample
// zones between 2010 and 2025 at and around the transition instant.
func TestInvariantsAtTransitions(t *testing.T) {
	for _, z := range propertyZones {
		loc := mustLoc(t, z)
		cur := time.Date(2010, 1, 1, 0, 0, 0, 0, loc)
		for cur.Year() < 2025 {
			_, end := cur.ZoneBounds()
			if end.IsZero() {
				break
			}
			e := end.UnixMicro()
			for _, d := range []int64{-HourMicros - 1, -1, 0, 1, HourMicros / 2, HourMicros, 2 * HourMicros} {
				for iv := Hour; iv <= Month; iv++ {
					checkInvariants(t, e+d, iv, loc, Monday)
					checkInvariants(t, e+d, iv, loc, Sunday)
				}
			}
			cur = end
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"hour", "day", "week", "month", "monday", "sunday", "", "Week"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if iv, err := ParseInterval(s); err == nil && iv.String() != s {
			t.Fatalf("ParseInterval(%q) = %v", s, iv)
		}
		if ws, err := ParseWeekStart(s); err == nil && ws.String() != s && s != "" {
			t.Fatalf("ParseWeekStart(%q) = %v", s, ws)
		}
	})
}

func BenchmarkBoundsHour(b *testing.B) {
	loc := mustLoc(b, "Europe/Berlin")
	from, to := mustTime(b, "2040-01-01T00:00:00+01:00"), mustTime(b, "2041-01-01T00:00:00+01:00")
	b.ReportAllocs()
	for range b.N {
		Bounds(from, to, Hour, loc, Monday)
	}
}

func BenchmarkFloorDay(b *testing.B) {
	loc := mustLoc(b, "Europe/Berlin")
	ts := mustTime(b, "2021-10-31T12:00:00+01:00")
	b.ReportAllocs()
	for i := range b.N {
		Floor(ts+int64(i)*1e6, Day, loc, Monday)
	}
}
