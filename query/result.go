package query

// Result shapes of spec §9. Field names are the JSON contract.

// Warning is a note on a result that is not an error (spec §9): the query
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
	Kind     string        `json:"kind"` // "trend"
	Range    ResolvedRange `json:"range"`
	TZ       string        `json:"tz"`
	Series   []TrendSeries `json:"series"`
	List     *ListResult   `json:"list,omitempty"`     // the users of one point, when asked
	Warnings []Warning     `json:"warnings,omitempty"` // notes on the query (spec §9): unknown events and values
	Stats    Stats         `json:"stats"`
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
}

// TrendBucket is one interval bucket of a trend series.
type TrendBucket struct {
	Start      string  `json:"start"` // calendar start, RFC 3339 in the query's zone
	Value      float64 `json:"value"`
	Incomplete bool    `json:"incomplete"` // the bucket extends past the end of the data or past now
}

// FunnelResult is the result of a funnel query.
type FunnelResult struct {
	Kind      string            `json:"kind"` // "funnel"
	Range     ResolvedRange     `json:"range"`
	TZ        string            `json:"tz"`
	WindowSec int64             `json:"window_seconds"`
	Steps     []FunnelStep      `json:"steps"`
	Breakdown []FunnelBreakdown `json:"breakdown,omitempty"` // by users at step 1 descending, "(other)" last
	List      *ListResult       `json:"list,omitempty"`      // the users of list.step, when asked
	Warnings  []Warning         `json:"warnings,omitempty"`  // notes on the query (spec §9): unknown events and values
	Stats     Stats             `json:"stats"`
}

// FunnelStep is one step's row: users who reached at least this step,
// conversion from step 1 and from the previous step (fractions in [0, 1]),
// and the average and median time from the previous step in seconds over
// the users who reached this step (null for step 1).
type FunnelStep struct {
	Step                   int      `json:"step"`
	Event                  string   `json:"event"`
	Users                  int64    `json:"users"`
	Conversion             float64  `json:"conversion"`
	ConversionFromPrevious float64  `json:"conversion_from_previous"`
	AvgSeconds             *float64 `json:"avg_seconds"`
	MedianSeconds          *float64 `json:"median_seconds"`
}

// FunnelBreakdown is the funnel of one breakdown value.
type FunnelBreakdown struct {
	Value string       `json:"value"`
	Steps []FunnelStep `json:"steps"`
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
	Warnings []Warning   `json:"warnings,omitempty"` // notes on the query (spec §9): unknown events and values
	Stats    Stats       `json:"stats"`
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

// CohortResult is the result of a cohort query (spec §7): the number of
// users in the cohort and a page of their ids (sorted by byte order).
type CohortResult struct {
	Kind     string        `json:"kind"` // "cohort"
	Range    ResolvedRange `json:"range"`
	TZ       string        `json:"tz"`
	Users    int64         `json:"users"`
	UserIDs  []string      `json:"user_ids"`
	Offset   int           `json:"offset"`
	Limit    int           `json:"limit"`
	Warnings []Warning     `json:"warnings,omitempty"` // notes on the query (spec §9): unknown events and values
	Stats    Stats         `json:"stats"`
}

// ListResult is a page of the users behind a trend point, funnel step or
// retention cell: Users is their number (equal to the count shown for that step or
// cell), UserIDs the ids at [Offset, Offset+Limit) in byte order. The
// other fields echo the request.
type ListResult struct {
	Users          int64    `json:"users"`
	UserIDs        []string `json:"user_ids"`
	Offset         int      `json:"offset"`
	Limit          int      `json:"limit"`
	Series         int      `json:"series,omitempty"`
	Bucket         string   `json:"bucket,omitempty"`
	Step           int      `json:"step,omitempty"`
	Dropped        bool     `json:"dropped,omitempty"`
	CohortStart    string   `json:"cohort_start,omitempty"`
	Period         int      `json:"period,omitempty"`
	BreakdownValue *string  `json:"breakdown_value,omitempty"`

	// ListCoords echo the coordinates of the new kinds' lists (kinds.go).
	ListCoords
}
