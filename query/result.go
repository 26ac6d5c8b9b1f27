package query

import (
	"encoding/csv"
	"io"
)

// Result shapes of docs/analytics.md §9. Field names are the JSON contract.

// Result is the result of a query (docs/analytics.md §9), as Run returns it: one of
// *TrendResult, *FunnelResult, *RetentionResult, *CohortResult,
// *StickinessResult, *LifecycleResult, *PathsResult or
// *AttributionResult, owned by the caller. Its JSON encoding is the
// result of the API; WriteTable and WriteCSV render it. Only this
// package's results implement it: each kind's result type holds its own
// methods (a new kind adds its result type with them).
type Result interface {
	// ResultKind returns the kind of query that made the result: its
	// "kind" ("trend", "funnel", …).
	ResultKind() string
	// parts points into the result: its stats, warnings and list.
	parts() resultFields
	// writeTable prints the result's tables (WriteTable, after its
	// warnings) to a tab-separated writer.
	writeTable(w io.Writer)
	// writeCSV writes the result's tidy CSV, header first (WriteCSV,
	// when the result lists no users).
	writeCSV(cw *csv.Writer)
}

// resultFields points into a result: its stats, its warnings and either
// its list (nil when not asked) or, for a cohort, its page of user ids.
type resultFields struct {
	stats    *Stats
	warnings *[]Warning
	list     **ListResult // nil for a cohort, whose page of users is the result itself
	ids      *[]string    // a cohort's page of user ids; nil for the others
}

// Warning is a note on a result that is not an error (docs/analytics.md §9): the query
// ran, but probably not as meant. Code is WarnUnknownEvent or
// WarnUnknownValue; Field is the JSON path of the query field concerned.
// Every result type has a Warnings field (see WarningsOf).
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Warning codes.
const (
	// WarnUnknownEvent: a matcher names an event that occurs nowhere in
	// the app (not only outside the range).
	WarnUnknownEvent = "unknown_event"
	// WarnUnknownValue: a string filter compares with a value the
	// property holds nowhere in the app.
	WarnUnknownValue = "unknown_value"
)

// ResolvedRange is the range a query ran over, as RFC 3339 instants in its
// time zone.
type ResolvedRange struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// TrendResult is the result of a trend query.
type TrendResult struct {
	Kind   string        `json:"kind"` // "trend"
	Range  ResolvedRange `json:"range"`
	TZ     string        `json:"tz"`
	Series []TrendSeries `json:"series"`
	// Formulas (docs/analytics.md §12), per breakdown value (and period), in query
	// order.
	Formulas []TrendFormula `json:"formulas,omitempty"`
	// CompareRange is the compared period's range, with compare.
	CompareRange *ResolvedRange `json:"compare_range,omitempty"`
	List         *ListResult    `json:"list,omitempty"`     // the users of one point, when asked
	Warnings     []Warning      `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats        Stats          `json:"stats"`
}

// ResultKind returns "trend".
func (r *TrendResult) ResultKind() string { return "trend" }

func (r *TrendResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// TrendFormula is one formula's row: per bucket its value (null on a
// division by zero) and its total (the formula over the series' totals).
type TrendFormula struct {
	Formula        string               `json:"formula"`
	Label          string               `json:"label"`
	Period         string               `json:"period,omitempty"` // with compare: current | previous
	BreakdownValue *string              `json:"breakdown_value"`  // null without a breakdown
	Buckets        []TrendFormulaBucket `json:"buckets"`
	Total          *float64             `json:"total"`
}

// TrendFormulaBucket is one bucket of a formula; Start is the bucket's
// calendar start as the series show it.
type TrendFormulaBucket struct {
	Start string   `json:"start"`
	Value *float64 `json:"value"`
}

// TrendSeries is one series (× breakdown value) of a trend result.
type TrendSeries struct {
	Series         int           `json:"series"` // the index of the query series (0-based), as a list's "series" names it
	Label          string        `json:"label"`
	Event          string        `json:"event"`
	Math           string        `json:"math"`
	Property       string        `json:"property,omitempty"` // the property of sum … p99
	BreakdownValue *string       `json:"breakdown_value"`    // null without a breakdown; "(none)" for unset, "(other)" for the merged rest
	Buckets        []TrendBucket `json:"buckets"`
	// Total is the range total: for count and sum the sum of the buckets;
	// for users, wau and mau the distinct users counted in any bucket; for
	// the other maths the math over all the range's values or per-user
	// counts (not an aggregate of the buckets).
	Total float64 `json:"total"`
	// Period is, with compare, "current" or "previous" (the previous
	// period's buckets carry their own starts and align by position).
	Period string `json:"period,omitempty"`
}

// TrendBucket is one interval bucket of a trend series.
type TrendBucket struct {
	Start      string  `json:"start"` // calendar start, RFC 3339 in the query's zone
	Value      float64 `json:"value"`
	Incomplete bool    `json:"incomplete"` // the bucket extends past the end of the data or past now
}

// FunnelResult is the result of a funnel query: the step table (view
// steps), the buckets of conversion over time (view trends) or the
// time-to-convert histogram (view time_to_convert), over all users and
// per breakdown value.
type FunnelResult struct {
	Kind      string        `json:"kind"`            // "funnel"
	View      string        `json:"view,omitempty"`  // trends | time_to_convert; omitted for steps
	Order     string        `json:"order,omitempty"` // strict | unordered; omitted for ordered
	Range     ResolvedRange `json:"range"`
	TZ        string        `json:"tz"`
	WindowSec int64         `json:"window_seconds"`
	// FromStep and ToStep are the trends and time-to-convert views' steps.
	FromStep int                 `json:"from_step,omitempty"`
	ToStep   int                 `json:"to_step,omitempty"`
	Steps    []FunnelStep        `json:"steps,omitempty"`
	Buckets  []FunnelTrendBucket `json:"buckets,omitempty"`
	*FunnelTimes
	Breakdown []FunnelBreakdown `json:"breakdown,omitempty"` // by users counted descending, "(other)" last
	List      *ListResult       `json:"list,omitempty"`      // the users behind one number, when asked
	Warnings  []Warning         `json:"warnings,omitempty"`  // notes on the query (docs/analytics.md §9): unknown events and values
	Stats     Stats             `json:"stats"`
}

// ResultKind returns "funnel".
func (r *FunnelResult) ResultKind() string { return "funnel" }

func (r *FunnelResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// FunnelStep is one step's row: users who reached at least this step,
// conversion from step 1 and from the previous step (fractions in [0, 1]),
// and the average and median time from the previous step in seconds over
// the users who reached this step (null for step 1). Label is the step's
// event name, or in an unordered funnel "1 step", "2 steps", … (Event is
// then null).
type FunnelStep struct {
	Step                   int      `json:"step"`
	Label                  string   `json:"label"`
	Event                  *string  `json:"event"`
	Users                  int64    `json:"users"`
	Conversion             float64  `json:"conversion"`
	ConversionFromPrevious float64  `json:"conversion_from_previous"`
	AvgSeconds             *float64 `json:"avg_seconds"`
	MedianSeconds          *float64 `json:"median_seconds"`
}

// FunnelTrendBucket is one bucket of conversion over time: users with an
// attempt entered in the bucket that reached from_step (Entered) and
// to_step (Converted), Converted/Entered (null when Entered is 0), and
// whether the bucket's end plus the window passes the end of the data or
// now (its users may still convert).
type FunnelTrendBucket struct {
	Start      string   `json:"start"`
	Entered    int64    `json:"entered"`
	Converted  int64    `json:"converted"`
	Conversion *float64 `json:"conversion"`
	Incomplete bool     `json:"incomplete"`
}

// FunnelTimes is the time-to-convert histogram: users per bin of seconds
// from from_step to to_step, the users counted and their mean and median
// (null when none).
type FunnelTimes struct {
	Histogram      []FunnelBin `json:"histogram"`
	Users          int64       `json:"users"`
	AverageSeconds *float64    `json:"average_seconds"`
	MedianSeconds  *float64    `json:"median_seconds"`
}

// FunnelBin is one histogram bin, [FromSeconds, ToSeconds) (the last bin
// also holds ToSeconds).
type FunnelBin struct {
	FromSeconds int64 `json:"from_seconds"`
	ToSeconds   int64 `json:"to_seconds"`
	Users       int64 `json:"users"`
}

// FunnelBreakdown is the funnel of one breakdown value, in the query's
// view.
type FunnelBreakdown struct {
	Value   string              `json:"value"`
	Steps   []FunnelStep        `json:"steps,omitempty"`
	Buckets []FunnelTrendBucket `json:"buckets,omitempty"`
	*FunnelTimes
}

// RetentionResult is the result of a retention query.
type RetentionResult struct {
	Kind    string            `json:"kind"` // "retention"
	Range   ResolvedRange     `json:"range"`
	TZ      string            `json:"tz"`
	Period  string            `json:"period"`
	Cohorts []RetentionCohort `json:"cohorts"`
	// Mean is, per period k, the user-weighted mean retention rate over the
	// cohorts whose cell k is complete (null when none is).
	Mean     []*float64  `json:"mean"`
	List     *ListResult `json:"list,omitempty"`     // the users of one cell, when asked
	Warnings []Warning   `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats    Stats       `json:"stats"`
}

// ResultKind returns "retention".
func (r *RetentionResult) ResultKind() string { return "retention" }

func (r *RetentionResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, list: &r.List}
}

// RetentionCohort is one cohort row: Retained[k] users retained at period
// k (Retained[0] = Size), Rates[k] = Retained[k]/Size, Incomplete[k] when
// period k's bucket extends past the end of the data or past now.
type RetentionCohort struct {
	Start          string    `json:"start"`
	BreakdownValue *string   `json:"breakdown_value"`
	Size           int64     `json:"size"`
	Retained       []int64   `json:"retained"`
	Rates          []float64 `json:"rates"`
	Incomplete     []bool    `json:"incomplete"`
}

// CohortResult is the result of a cohort query (docs/analytics.md §7): the number of
// users in the cohort and a page of their ids (sorted by byte order).
type CohortResult struct {
	Kind     string        `json:"kind"` // "cohort"
	Range    ResolvedRange `json:"range"`
	TZ       string        `json:"tz"`
	Users    int64         `json:"users"`
	UserIDs  []string      `json:"user_ids"`
	Offset   int           `json:"offset"`
	Limit    int           `json:"limit"`
	Warnings []Warning     `json:"warnings,omitempty"` // notes on the query (docs/analytics.md §9): unknown events and values
	Stats    Stats         `json:"stats"`
}

// ResultKind returns "cohort".
func (r *CohortResult) ResultKind() string { return "cohort" }

func (r *CohortResult) parts() resultFields {
	return resultFields{stats: &r.Stats, warnings: &r.Warnings, ids: &r.UserIDs}
}

// ListResult is a page of the users behind one number of a result
// (List): Users is their number (equal to the count shown there), UserIDs
// the ids at [Offset, Offset+Limit) in byte order. ListCoords echo the
// request.
type ListResult struct {
	Users   int64    `json:"users"`
	UserIDs []string `json:"user_ids"`
	Offset  int      `json:"offset"`
	Limit   int      `json:"limit"`
	ListCoords
}
