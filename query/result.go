package query

// Result shapes of spec §9. Field names are the JSON contract.

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
	Stats  Stats         `json:"stats"`
}

// TrendSeries is one series (× breakdown value) of a trend result.
type TrendSeries struct {
	Label          string        `json:"label"`
	Event          string        `json:"event"`
	Math           string        `json:"math"`
	BreakdownValue *string       `json:"breakdown_value"` // null without a breakdown
	Buckets        []TrendBucket `json:"buckets"`
	// Total is the range total: for count the sum of the buckets, for users
	// the distinct users over the whole range (not a sum of buckets).
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
	Breakdown []FunnelBreakdown `json:"breakdown,omitempty"`
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
	Mean  []*float64 `json:"mean"`
	Stats Stats      `json:"stats"`
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
