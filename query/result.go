package query

import (
	"encoding/csv"
	"encoding/json"
	"io"
)

// Result shapes of docs/analytics.md §9. Field names are the JSON contract.

// Result is the result of a query (docs/analytics.md §9), as Run returns it: one of
// *TrendResult, *FunnelResult, *RetentionResult, *CohortResult,
// *StickinessResult, *LifecycleResult, *PathsResult or
// *AttributionResult, owned by the caller. Its JSON encoding is the
// result of the API; WriteTable and WriteCSV render it. Only this
// package's results implement it: each kind's file (trend.go, funnel.go,
// …) holds its result type with these methods, its table and its CSV
// rendering (see kind for adding a kind).
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

// ListResult is a page of the users behind one number of a result
// (List): Users is their number (equal to the count shown there), UserIDs
// the ids at [Offset, Offset+Limit) in byte order — person ids
// (docs/identity.md §1). ListCoords echo the request. With List.DistinctIDs,
// Persons holds each listed person with its distinct ids, and the JSON's
// "user_ids" entries are those objects ({"id", "distinct_ids"}) instead
// of strings.
type ListResult struct {
	Users   int64        `json:"users"`
	UserIDs []string     `json:"user_ids"`
	Offset  int          `json:"offset"`
	Limit   int          `json:"limit"`
	Persons []ListPerson `json:"-"`
	ListCoords
}

// ListPerson is one listed person: its person id and all of its distinct
// ids, sorted by bytes (the slice is shared with the id graph: read only).
type ListPerson struct {
	ID          string   `json:"id"`
	DistinctIDs []string `json:"distinct_ids"`
}

// MarshalJSON renders r, with "user_ids" as ListPerson objects when
// Persons is set.
func (r ListResult) MarshalJSON() ([]byte, error) {
	type plain ListResult
	if r.Persons == nil {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		UserIDs []ListPerson `json:"user_ids"`
	}{plain(r), r.Persons})
}
