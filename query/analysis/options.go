package analysis

import "fmt"

// TrendMath is the aggregation of a trend series (spec §4). Only the math
// that needs no property values lives here; property aggregations are the
// query layer's.
type TrendMath uint8

// Trend maths. The zero value is count.
const (
	MathCount TrendMath = iota // number of matching events
	MathUsers                  // number of distinct users with a matching event (exact)
)

// RetentionType selects how a user enters a retention cohort (spec §6).
type RetentionType uint8

// Retention types. The zero value is the default, first_time.
const (
	TypeFirstTime RetentionType = iota // one entry: the user's earliest start event
	TypeRecurring                      // one entry per bucket of [From, To) with a start event
)

// RetentionWindows selects how retention periods are measured (spec §6).
type RetentionWindows uint8

// Retention windows. The zero value is the default, calendar.
const (
	WindowsCalendar RetentionWindows = iota // index = bucket(t) - bucket(s)
	WindowsRolling                          // index = ⌊(t - s) / P⌋
)

// RetentionCriterion selects when a user counts as retained at period k
// (spec §6).
type RetentionCriterion uint8

// Retention criteria. The zero value is the default, on.
const (
	CriterionOn        RetentionCriterion = iota // some return event has index exactly k
	CriterionOnOrAfter                           // some return event has index ≥ k
)

var (
	mathNames      = []string{"count", "users"}
	typeNames      = []string{"first_time", "recurring"}
	windowsNames   = []string{"calendar", "rolling"}
	criterionNames = []string{"on", "on_or_after"}
)

func enumString(names []string, v uint8, kind string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", kind, v)
}

func enumParse(names []string, s, kind string, allowEmpty bool) (uint8, error) {
	if s == "" && allowEmpty {
		return 0, nil
	}
	for i, n := range names {
		if n == s {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("analysis: unknown %s %q (want one of %q)", kind, s, names)
}

// String returns the query-language name ("count", "users").
func (m TrendMath) String() string { return enumString(mathNames, uint8(m), "math") }

// String returns the query-language name ("first_time", "recurring").
func (t RetentionType) String() string { return enumString(typeNames, uint8(t), "type") }

// String returns the query-language name ("calendar", "rolling").
func (w RetentionWindows) String() string { return enumString(windowsNames, uint8(w), "windows") }

// String returns the query-language name ("on", "on_or_after").
func (c RetentionCriterion) String() string {
	return enumString(criterionNames, uint8(c), "criterion")
}

// ParseTrendMath parses "count" or "users"; any other input (including "")
// returns an error listing the accepted names.
func ParseTrendMath(s string) (TrendMath, error) {
	v, err := enumParse(mathNames, s, "trend math", false)
	return TrendMath(v), err
}

// ParseRetentionType parses "first_time" or "recurring"; "" is the default
// first_time. Other input returns an error listing the accepted names.
func ParseRetentionType(s string) (RetentionType, error) {
	v, err := enumParse(typeNames, s, "retention type", true)
	return RetentionType(v), err
}

// ParseRetentionWindows parses "calendar" or "rolling"; "" is the default
// calendar. Other input returns an error listing the accepted names.
func ParseRetentionWindows(s string) (RetentionWindows, error) {
	v, err := enumParse(windowsNames, s, "retention windows", true)
	return RetentionWindows(v), err
}

// ParseRetentionCriterion parses "on" or "on_or_after"; "" is the default
// on. Other input returns an error listing the accepted names.
func ParseRetentionCriterion(s string) (RetentionCriterion, error) {
	v, err := enumParse(criterionNames, s, "retention criterion", true)
	return RetentionCriterion(v), err
}

// checkBounds validates a calendar boundary list: at least two strictly
// increasing boundaries with Bounds[0] ≤ from < to ≤ Bounds[len-1].
func checkBounds(kind string, b []int64, from, to int64) error {
	if from >= to {
		return fmt.Errorf("analysis: %s: empty range [%d, %d)", kind, from, to)
	}
	if len(b) < 2 {
		return fmt.Errorf("analysis: %s: %d bucket boundaries, need at least 2", kind, len(b))
	}
	for i := 1; i < len(b); i++ {
		if b[i] <= b[i-1] {
			return fmt.Errorf("analysis: %s: bucket boundaries not increasing at index %d", kind, i)
		}
	}
	if b[0] > from || b[len(b)-1] < to {
		return fmt.Errorf("analysis: %s: boundaries [%d, %d] do not cover range [%d, %d)", kind, b[0], b[len(b)-1], from, to)
	}
	return nil
}
