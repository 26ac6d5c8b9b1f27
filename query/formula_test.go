package query

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestFormulaEval(t *testing.T) {
	vals := []float64{6, 3, 0}
	for src, want := range map[string]float64{
		"A / B * 100": 200, "A + B * 2": 12, "(A + B) * 2": 18, "-A": -6, "A - -B": 9, "- (A - B)": -3,
		"A/B/2": 1, "A-B-1": 2, "1.5 * B": 4.5, "C": 0, " a + b ": 9, "10": 10, "C * A": 0,
	} {
		f, err := parseFormula(src, 3)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got, ok := f.eval(vals); !ok || got != want {
			t.Errorf("%q = %v, %v; want %v", src, got, ok, want)
		}
	}
	// Division by zero is null, and a null operand makes the result null.
	for _, src := range []string{"A / C", "A / C + 1", "-(B / (A - 2 * B))", "(A/C) * 0"} {
		f, err := parseFormula(src, 3)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if v, ok := f.eval(vals); ok {
			t.Errorf("%q = %v, want null", src, v)
		}
	}
	f, _ := parseFormula("A * A * A * A * A * A * A * A * A * A", 1)
	if v, ok := f.eval([]float64{1e300}); ok {
		t.Errorf("overflow = %v, want null (JSON has no infinity)", v)
	}
	if v, ok := f.eval([]float64{math.Copysign(0, -1)}); !ok || v != 0 {
		t.Errorf("-0 → %v %v", v, ok)
	}
}

// TestFormulaErrors: anything outside the grammar is an error naming the
// position (1-based) and what was found.
func TestFormulaErrors(t *testing.T) {
	for src, want := range map[string]string{
		"":           "at position 1: empty formula",
		"   ":        "at position 1: empty formula",
		"A /":        "at position 4: unexpected end of formula",
		"A % B":      "at position 3: unexpected '%'",
		"A + C":      "at position 5: letter C has no series (the query has 2: A, B)",
		"(A + B":     "at position 7: unexpected end of formula, want ) to close the ( at position 1",
		"AB":         "at position 1: a series is one letter",
		"1.":         "at position 3: unexpected end of formula, want a digit",
		"A B":        "at position 3: unexpected 'B', want an operator",
		"A ** B":     "at position 4: unexpected '*'",
		"sum(A)":     "at position 1: a series is one letter",
		"A + )":      "at position 5: unexpected ')'",
		"+A":         "at position 1: unexpected '+'",
		"A / 2e3":    "at position 6: unexpected 'e'",
		"A\u00e9":    "at position 2: unexpected",
		"2 * (A-B))": "at position 10: unexpected ')'",
	} {
		_, err := parseFormula(src, 2)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
	deep := strings.Repeat("(", 500) + "A" + strings.Repeat(")", 500)
	if _, err := parseFormula(deep, 1); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
	if _, err := parseFormula(strings.Repeat("-", 500)+"A", 1); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep negation: %v", err)
	}
}

func FuzzParseFormula(f *testing.F) {
	for _, s := range []string{"A / B * 100", "(A+B)*2", "-A", "1.5", "A %", "((A)", "Z", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fm, err := parseFormula(s, 3)
		if err != nil {
			if _, ok := err.(*formulaError); !ok {
				t.Fatalf("%q: error %T", s, err)
			}
			return
		}
		fm.eval([]float64{1, 2, 0})
	})
}

// TestCompareRange: previous periods count calendar days for date ranges
// (across DST) and durations for instants; offsets move along the
// calendar, months and years clamped to month ends.
func TestCompareRange(t *testing.T) {
	berlin, at := berlinTimes(t)
	for _, c := range []struct {
		from, to, compare string
		wantFrom, wantTo  string
	}{
		// 5 days back, as in the spec's example.
		{"2021-01-15", "2021-01-20", "previous", "2021-01-10", "2021-01-15"},
		// 3 calendar days containing the spring-forward day (71 hours): the
		// 3 days before, 72 hours long.
		{"2021-03-28", "2021-03-31", "previous", "2021-03-25", "2021-03-28"},
		// Instants: the same duration (71 h) before.
		{"2021-03-28T00:00:00+01:00", "2021-03-31T00:00:00+02:00", "previous", "2021-03-25T01:00:00+01:00", "2021-03-28T00:00:00+01:00"},
		// A calendar month: its 31 days before it.
		{"2021-03-01", "2021-04-01", "previous", "2021-01-29", "2021-03-01"},
		// Offsets keep the wall clock across DST and clamp month ends.
		{"2021-03-31", "2021-04-30", "-1mo", "2021-02-28", "2021-03-30"},
		{"2020-02-29", "2020-03-01", "-1y", "2019-02-28", "2019-03-01"},
		{"2021-04-01T09:00:00+02:00", "2021-04-02T09:00:00+02:00", "-1w", "2021-03-25T09:00:00+01:00", "2021-03-26T09:00:00+01:00"},
		{"2021-04-01", "2021-04-08", "-28d", "2021-03-04", "2021-03-11"},
		{"2021-04-01T09:00:00+02:00", "2021-04-01T10:00:00+02:00", "-24h", "2021-03-31T09:00:00+02:00", "2021-03-31T10:00:00+02:00"},
		{"2021-10-31", "2021-11-01", "-1d", "2021-10-30", "2021-10-31"}, // a 25-hour day compared with a 24-hour one
		// Overlap is allowed.
		{"2021-01-01", "2021-01-15", "-1w", "2020-12-25", "2021-01-08"},
	} {
		p := &plan{loc: berlin, from: at(c.from), to: at(c.to)}
		_, fd, _ := parseBound(c.from, berlin)
		_, td, _ := parseBound(c.to, berlin)
		p.calendar = fd && td
		from, to, err := p.compareRange(c.compare)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if from != at(c.wantFrom) || to != at(c.wantTo) {
			t.Errorf("%s..%s %s: got %s..%s, want %s..%s", c.from, c.to, c.compare, formatTime(from, berlin), formatTime(to, berlin), c.wantFrom, c.wantTo)
		}
	}
	p := &plan{loc: berlin, from: at("2021-01-01"), to: at("2021-01-02")}
	for _, bad := range []string{"1w", "+1w", "-0d", "last", "-1x", "-", "--1d", "-1.5d"} {
		if _, _, err := p.compareRange(bad); err == nil || !strings.Contains(err.Error(), "compare") {
			t.Errorf("compare %q: error %v", bad, err)
		}
	}
}

// TestRelativeRange: "last" ranges are calendar days, weeks, months or
// years in the zone ending with today (today included), or fixed spans
// ending at now.
func TestRelativeRange(t *testing.T) {
	berlin, at := berlinTimes(t)
	for _, c := range []struct {
		now, last, from, to string
	}{
		{"2021-03-31T10:00:00+02:00", "7d", "2021-03-25", "2021-04-01"}, // across the DST change: 167 hours
		{"2021-03-31T10:00:00+02:00", "1d", "2021-03-31", "2021-04-01"},
		{"2021-03-31T10:00:00+02:00", "4w", "2021-03-04", "2021-04-01"},
		{"2021-03-31T10:00:00+02:00", "3mo", "2021-01-01", "2021-04-01"},
		{"2021-01-31T23:59:00+01:00", "1mo", "2021-01-01", "2021-02-01"},
		{"2021-01-15T00:00:00+01:00", "2mo", "2020-12-01", "2021-02-01"},
		{"2021-03-31T10:00:00+02:00", "1y", "2021-01-01", "2022-01-01"},
		{"2020-02-29T12:00:00+01:00", "2y", "2019-01-01", "2021-01-01"},
		{"2021-03-28T03:30:00+02:00", "24h", "2021-03-27T02:30:00+01:00", "2021-03-28T03:30:00+02:00"},
		{"2021-03-28T03:30:00+02:00", "90m", "2021-03-28T01:00:00+01:00", "2021-03-28T03:30:00+02:00"},
		// Just after local midnight, "today" is the new day.
		{"2021-03-30T22:30:00Z", "1d", "2021-03-31", "2021-04-01"},
	} {
		from, to, err := relativeRange(c.last, at(c.now), berlin)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if from != at(c.from) || to != at(c.to) {
			t.Errorf("last %s at %s: got %s..%s, want %s..%s", c.last, c.now, formatTime(from, berlin), formatTime(to, berlin), c.from, c.to)
		}
	}
	for _, bad := range []string{"0d", "-7d", "+7d", "7", "week", "7x", "1.5d", ""} {
		if _, _, err := relativeRange(bad, 0, berlin); err == nil {
			t.Errorf("last %q accepted", bad)
		}
	}
}

func TestParseDurationSpec(t *testing.T) {
	for s, want := range map[string]Duration{"-1w": {-1, "w"}, "+2mo": {2, "mo"}, "-28d": {-28, "d"}, "-1y": {-1, "y"}, "-90m": {-90, "m"}} {
		if got, err := ParseDurationSpec(s, true); err != nil || got != want {
			t.Errorf("%q: %+v %v", s, got, err)
		}
	}
	for _, s := range []string{"-1w", "+1d"} {
		if _, err := ParseDurationSpec(s, false); err == nil {
			t.Errorf("unsigned %q accepted", s)
		}
	}
}

func FuzzParseDurationSpec(f *testing.F) {
	for _, s := range []string{"90s", "30m", "12h", "7d", "2w", "3mo", "1y", "-1w", "+2mo", "0d", "mo", "1.5d", "99999999999999999999y"} {
		f.Add(s)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseDurationSpec(s, true); err == nil {
			if fixed, err := d.Fixed(); err == nil && d.N >= 0 && fixed < 0 {
				t.Fatalf("%q: negative length %d", s, fixed)
			}
			if _, err := d.Shift(1617000000000000, berlin); err != nil && d.Calendar() && d.N < 1e6 && d.N > -1e6 {
				t.Fatalf("%q: shift: %v", s, err)
			}
		}
		if from, to, err := relativeRange(s, 1617000000000000, berlin); err == nil && from >= to {
			t.Fatalf("%q: empty relative range %d..%d", s, from, to)
		}
	})
}

// berlinTimes returns Europe/Berlin and a parser of dates and instants in it.
func berlinTimes(t *testing.T) (*time.Location, func(string) int64) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return berlin, func(s string) int64 {
		v, _, ok := parseBound(s, berlin)
		if !ok {
			t.Fatalf("bad time %q", s)
		}
		return v
	}
}
