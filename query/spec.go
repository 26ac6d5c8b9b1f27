// Package query turns a docs/analytics.md §9 JSON query into a validated plan, runs it
// over a storage snapshot (shards in parallel, one pass per user trail) and
// returns the §9 JSON result with its stats.
package query

import (
	"encoding/json"
	"fmt"
)

// Query is the docs/analytics.md §9 request. Field names are the JSON contract; fields
// may be added, never renamed.
type Query struct {
	Kind      string     `json:"kind"`                 // one of Kinds: trend | funnel | retention | cohort | stickiness | lifecycle | paths | attribution
	App       string     `json:"app,omitempty"`        // app name; the CLI's --app fills it when empty
	Range     *Range     `json:"range,omitempty"`      // [from, to); default: the app's whole data, by day in tz
	TZ        string     `json:"tz,omitempty"`         // IANA zone; default the app's, else UTC
	Now       string     `json:"now,omitempty"`        // RFC 3339 instant used as "now" for incomplete flags; default the wall clock
	Where     []Filter   `json:"where,omitempty"`      // global event filters
	Cohort    RawJSON    `json:"cohort,omitempty"`     // cohort condition tree (docs/analytics.md §7) or the name of a saved cohort
	Breakdown *Breakdown `json:"breakdown,omitempty"`  // breakdown (docs/analytics.md §4)
	Interval  string     `json:"interval,omitempty"`   // trend: hour | day (default) | week | month
	WeekStart string     `json:"week_start,omitempty"` // monday (default) | sunday
	Series    []Series   `json:"series,omitempty"`     // trend series
	Steps     []Matcher  `json:"steps,omitempty"`      // funnel steps, 2..32
	Window    string     `json:"window,omitempty"`     // funnel conversion window, default "14d"
	Start     *Matcher   `json:"start,omitempty"`      // retention start matcher A
	Return    *Matcher   `json:"return,omitempty"`     // retention return matcher B, default $any
	Period    string     `json:"period,omitempty"`     // retention: hour | day (default) | week | month
	Periods   int        `json:"periods,omitempty"`    // retention N; default 7 (day), 4 (week), 3 (month), 24 (hour)
	Type      string     `json:"type,omitempty"`       // retention: first_time (default) | recurring
	Windows   string     `json:"windows,omitempty"`    // retention: calendar (default) | rolling
	Criterion string     `json:"criterion,omitempty"`  // retention: on (default) | on_or_after
	List      *List      `json:"list,omitempty"`       // users to list: the users behind one number of the result (paged)
	Limits    *Limits    `json:"limits,omitempty"`     // tighter time and memory limits than the engine's (docs/analytics.md §9)
	// Persons false counts distinct ids instead of persons (docs/identity.md
	// §3): each distinct id's trail alone, as before any identity operation.
	// Default true.
	Persons *bool `json:"persons,omitempty"`
	// Funnel modes and views (docs/analytics.md §11).
	Order      string      `json:"order,omitempty"`      // funnel: ordered (default) | strict | unordered
	Exclusions []Exclusion `json:"exclusions,omitempty"` // funnel: events that exclude attempts between two steps
	View       string      `json:"view,omitempty"`       // funnel: steps (default) | trends | time_to_convert
	FromStep   int         `json:"from_step,omitempty"`  // funnel trends and time to convert: default 1
	ToStep     int         `json:"to_step,omitempty"`    // funnel trends and time to convert: default the last step
	Bins       int         `json:"bins,omitempty"`       // time to convert: 1..90, default ⌈∛users⌉ clamped to 1..60
	// Trend formulas and comparison (docs/analytics.md §12).
	Formulas []string `json:"formulas,omitempty"` // formulas over the series lettered A, B, …
	Formula  string   `json:"formula,omitempty"`  // one formula (added after formulas)
	Compare  string   `json:"compare,omitempty"`  // "previous" or a signed offset such as "-1w"

	// AnalysisQuery holds the fields of kinds stickiness, lifecycle,
	// paths and attribution (kinds.go).
	AnalysisQuery
}

// Exclusion excludes a funnel attempt between two steps (docs/analytics.md §11): an
// event matching Event and Where after the attempt reached step j,
// FromStep ≤ j < ToStep, within the window.
type Exclusion struct {
	Event    string   `json:"event"`
	Where    []Filter `json:"where,omitempty"`
	FromStep int      `json:"from_step,omitempty"` // default 1
	ToStep   int      `json:"to_step,omitempty"`   // default the last step
}

// RawJSON is an unparsed JSON value kept for a later stage.
type RawJSON = json.RawMessage

// Range is a query time range [From, To): dates (local midnight in the
// query's time zone) or RFC 3339 instants; or a relative range Last (docs/analytics.md
// §2: "7d", "4w", "3mo", "1y" are calendar days, weeks, months or years
// in the zone ending with today, "24h" and "90m" end at now).
type Range struct {
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
	Last string `json:"last,omitempty"`
}

// Matcher selects events: by name ("$any" for every event) and filters.
type Matcher struct {
	Event string   `json:"event"`
	Where []Filter `json:"where,omitempty"`
}

// Series is one trend series: a matcher and a math.
type Series struct {
	Event string   `json:"event"`
	Where []Filter `json:"where,omitempty"`
	// Math is count (default), users, sum, avg, min, max, median, p75,
	// p90, p95, p99, count_per_user_avg, count_per_user_median,
	// count_per_user_max, wau or mau (docs/analytics.md §4).
	Math     string `json:"math,omitempty"`
	Property string `json:"property,omitempty"` // numeric event property of sum … p99
	Label    string `json:"label,omitempty"`    // display label; default the event name
}

// Filter is a property filter (docs/analytics.md §3): Op is eq, neq, in, not_in, gt,
// gte, lt, lte, contains, not_contains, is_set or is_not_set; Value is a
// JSON scalar (an array for in and not_in, nothing for is_set and
// is_not_set) coerced to the property's type.
type Filter struct {
	Property string  `json:"property"`
	Op       string  `json:"op"`
	Value    RawJSON `json:"value,omitempty"`
	Source   string  `json:"source,omitempty"` // event (default) | user
}

// Breakdown splits results by a property value (docs/analytics.md §4): Source is event
// (default) or user; Limit is how many values are kept (by largest range
// total; default 25), the rest merged into "(other)".
type Breakdown struct {
	Property string `json:"property"`
	Source   string `json:"source,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	// Attribution (funnels, event properties; docs/analytics.md §11): "entry"
	// (default), "first_touch", "last_touch", "all_steps" or {"step": k}.
	Attribution RawJSON `json:"attribution,omitempty"`
}

// List asks for a page of the user ids behind a number (docs/analytics.md §7): the
// number is named by ListCoords. Ids are sorted by byte order; Limit
// defaults to 100 (at most 10000).
type List struct {
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
	// DistinctIDs lists each person with its distinct ids
	// (ListResult.Persons; docs/identity.md §1).
	DistinctIDs bool `json:"distinct_ids"`
	ListCoords
}

// ListCoords name the number whose users a List pages, per kind (docs/analytics.md
// §7); a kind reads its own fields and rejects the others' where they
// would be ambiguous:
//
//   - cohort: none (the cohort's users);
//   - trend: Series (0-based index of a query series) and Bucket (a
//     bucket's start; without it the range total);
//   - funnel, view steps: Step (1-based; with Dropped the users whose
//     furthest step is Step); view trends: Bucket (a date or instant in
//     it) and Status ("entered" or "converted"); view time_to_convert:
//     Bin (0-based);
//   - retention: CohortStart and Period;
//   - stickiness: Series and Intervals (the number of buckets; at least,
//     when cumulative);
//   - lifecycle: Bucket and Status (new, returning, resurrecting or
//     dormant);
//   - paths: Source and Target (an edge's nodes, e.g. "1_home");
//   - attribution: Channel (as rendered, e.g. "(unattributed)").
//
// BreakdownValue narrows a funnel or retention list to one breakdown
// value as rendered in the result (including "(none)" and "(other)").
// ListResult echoes them.
type ListCoords struct {
	Series         int     `json:"series,omitempty"`
	Bucket         string  `json:"bucket,omitempty"`
	Status         string  `json:"status,omitempty"`
	Step           int     `json:"step,omitempty"`
	Dropped        bool    `json:"dropped,omitempty"`
	Bin            *int    `json:"bin,omitempty"`
	CohortStart    string  `json:"cohort_start,omitempty"`
	Period         int     `json:"period,omitempty"`
	Intervals      int     `json:"intervals,omitempty"`
	Source         string  `json:"source,omitempty"`
	Target         string  `json:"target,omitempty"`
	Channel        *string `json:"channel,omitempty"`
	BreakdownValue *string `json:"breakdown_value,omitempty"`
}

// Parse decodes a JSON query with DecodeJSON: unknown fields are rejected
// (a typo should not silently change a query) and errors name the JSON
// path of the offending field. The error is an *Error with code
// invalid_query.
func Parse(data []byte) (*Query, error) {
	var q Query
	target, done := decodeTarget(data, &q)
	if err := DecodeJSON(data, target); err != nil {
		return nil, err
	}
	done()
	return &q, nil
}

// Error codes of docs/analytics.md §9, with their HTTP statuses.
const (
	CodeInvalidQuery    = "invalid_query"   // 400: the query or request parameters
	CodeInvalidInput    = "invalid_input"   // 400/422: events or files
	CodeLimitExceeded   = "limit_exceeded"  // 413 body too large; 408 body too slow; 422/504 a query over a limit
	CodeUnauthenticated = "unauthenticated" // 401
	CodeForbidden       = "forbidden"       // 403
	CodeNotFound        = "not_found"       // 404
	CodeUnavailable     = "unavailable"     // 503, with Retry-After: memory taken by other queries too long (docs/storage.md §5), or a shutdown
	CodeCorruption      = "corruption"      // 500: a segment failed its checksums
	CodeInternal        = "internal"        // 500
)

// Error is a query failure in the docs/analytics.md §9 shape
// {"error": {"code", "message", "field"}}.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Err     error  `json:"-"` // the underlying error, if any
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Code + ": " + e.Field + ": " + e.Message
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// MarshalJSON renders the docs/analytics.md §9 envelope {"error": {...}}.
func (e *Error) MarshalJSON() ([]byte, error) {
	type body Error
	return json.Marshal(struct {
		Error *body `json:"error"`
	}{(*body)(e)})
}

func invalid(field, format string, args ...any) *Error {
	return &Error{Code: CodeInvalidQuery, Field: field, Message: fmt.Sprintf(format, args...)}
}
