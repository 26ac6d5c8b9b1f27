package analysis

import "fmt"

// TrendMath is the aggregation of a trend series (docs/analytics.md §4).
type TrendMath uint8

// Trend maths. The zero value is count. Property maths (sum … p99) take
// the values of a numeric property on the matching events that have it
// set; percentiles are exact (QuantileSelectFloat). The count-per-user maths
// take, per bucket, the distribution of the counts of matching events of
// each user with at least one. wau and mau count, per bucket, the users
// with a matching event in the 7 or 30 days ending at the bucket's end.
const (
	MathCount              TrendMath = iota // number of matching events
	MathUsers                               // distinct users with a matching event (exact)
	MathSum                                 // exact sum of the property
	MathAvg                                 // exact sum / number of values, correctly rounded
	MathMin                                 // smallest value
	MathMax                                 // largest value
	MathMedian                              // p50
	MathP75                                 // 75th percentile
	MathP90                                 // 90th percentile
	MathP95                                 // 95th percentile
	MathP99                                 // 99th percentile
	MathCountPerUserAvg                     // mean events per active user
	MathCountPerUserMedian                  // median events per active user
	MathCountPerUserMax                     // most events of one user
	MathWAU                                 // users active in the 7 days ending at the bucket end
	MathMAU                                 // users active in the 30 days ending at the bucket end
)

// NeedsProperty reports whether the math aggregates a numeric property
// (sum, avg, min, max, median and the percentiles).
func (m TrendMath) NeedsProperty() bool { return m >= MathSum && m <= MathP99 }

// Quantile reports whether the math is a quantile of a property (median
// and the percentiles), whose state is the list of the values.
func (m TrendMath) Quantile() bool { return m >= MathMedian && m <= MathP99 }

// Mergeable reports whether the values of several breakdown keys can be
// merged into one group after the fact (count and the property maths);
// the maths that count users cannot, since a user may appear under
// several keys.
func (m TrendMath) Mergeable() bool { return m == MathCount || m.NeedsProperty() }

// Level returns the quantile level of median, the percentiles and
// count_per_user_median (0.5 … 0.99); 0 for the other maths.
func (m TrendMath) Level() float64 {
	switch m {
	case MathMedian, MathCountPerUserMedian:
		return 0.5
	case MathP75:
		return 0.75
	case MathP90:
		return 0.90
	case MathP95:
		return 0.95
	case MathP99:
		return 0.99
	}
	return 0
}

// Window returns the look-back window of wau (7 days) and mau (30 days)
// in µs; 0 for the other maths.
func (m TrendMath) Window() int64 {
	switch m {
	case MathWAU:
		return WAUWindow
	case MathMAU:
		return MAUWindow
	}
	return 0
}

// RetentionType selects how a user enters a retention cohort (docs/analytics.md §6).
type RetentionType uint8

// Retention types. The zero value is the default, first_time.
const (
	TypeFirstTime RetentionType = iota // one entry: the user's earliest start event
	TypeRecurring                      // one entry per bucket of [From, To) with a start event
)

// RetentionWindows selects how retention periods are measured (docs/analytics.md §6).
type RetentionWindows uint8

// Retention windows. The zero value is the default, calendar.
const (
	WindowsCalendar RetentionWindows = iota // index = bucket(t) - bucket(s)
	WindowsRolling                          // index = ⌊(t - s) / P⌋
)

// RetentionCriterion selects when a user counts as retained at period k
// (docs/analytics.md §6).
type RetentionCriterion uint8

// Retention criteria. The zero value is the default, on.
const (
	CriterionOn        RetentionCriterion = iota // some return event has index exactly k
	CriterionOnOrAfter                           // some return event has index ≥ k
)

var (
	mathNames = []string{"count", "users", "sum", "avg", "min", "max", "median", "p75", "p90", "p95", "p99",
		"count_per_user_avg", "count_per_user_median", "count_per_user_max", "wau", "mau"}
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

// String returns the query-language name ("count", "users", "p90", …).
func (m TrendMath) String() string { return enumString(mathNames, uint8(m), "math") }

// String returns the query-language name ("first_time", "recurring").
func (t RetentionType) String() string { return enumString(typeNames, uint8(t), "type") }

// String returns the query-language name ("calendar", "rolling").
func (w RetentionWindows) String() string { return enumString(windowsNames, uint8(w), "windows") }

// String returns the query-language name ("on", "on_or_after").
func (c RetentionCriterion) String() string {
	return enumString(criterionNames, uint8(c), "criterion")
}

// ParseTrendMath parses a math name (see the TrendMath constants: "count",
// "users", "sum", "avg", "min", "max", "median", "p75", "p90", "p95",
// "p99", "count_per_user_avg", "count_per_user_median",
// "count_per_user_max", "wau", "mau"); any other input (including "")
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
