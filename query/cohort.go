package query

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/trail"
)

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

// condJSON is one node of a cohort condition tree (docs/analytics.md §7, §9): exactly
// one of the condition keys, plus count and window for performed
// conditions and window for not_performed and first_performed.
type condJSON struct {
	And            []json.RawMessage `json:"and"`
	Or             []json.RawMessage `json:"or"`
	Not            json.RawMessage   `json:"not"`
	Performed      *Matcher          `json:"performed"`
	NotPerformed   *Matcher          `json:"not_performed"`
	FirstPerformed *Matcher          `json:"first_performed"`
	UserProperty   *Filter           `json:"user_property"`
	Saved          *string           `json:"saved"`
	Count          *struct {
		Op    string `json:"op"`
		Value int64  `json:"value"`
	} `json:"count"`
	Window *struct {
		LastDays *int   `json:"last_days"`
		From     string `json:"from"`
		To       string `json:"to"`
	} `json:"window"`
}

// maxCohortDepth bounds the nesting of cohort trees (and of saved
// cohorts referring to saved cohorts).
const maxCohortDepth = 32

// parseCohortFilter compiles the query's cohort (an inline condition tree
// or the name of a saved cohort) into p.cohort, giving its matchers mask
// bits after the analysis'. Without a cohort it does nothing.
func (p *plan) parseCohortFilter() error {
	raw := bytes.TrimSpace(p.q.Cohort)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	p.cohortFrom, p.cohortTo = p.from, p.from
	c, err := p.parseCond(raw, "cohort", nil, 0)
	if err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return &Error{Code: CodeInternal, Message: err.Error(), Err: err}
	}
	p.cohort = &c
	return nil
}

// parseCond parses one condition node at JSON path field; saved lists the
// saved cohorts being expanded (to refuse cycles).
func (p *plan) parseCond(raw json.RawMessage, field string, saved []string, depth int) (analysis.CohortCond, error) {
	var none analysis.CohortCond
	if depth > maxCohortDepth {
		return none, invalid(field, "cohort conditions nest deeper than %d levels", maxCohortDepth)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return none, invalid(field, "%v", err)
		}
		return p.savedCond(name, field, saved, depth)
	}
	n, err := decodeCond(raw, field)
	if err != nil {
		return none, err
	}
	switch {
	case n.And != nil || n.Or != nil:
		return p.parseAndOr(n, field, saved, depth)
	case n.Not != nil:
		kc, err := p.parseCond(n.Not, field+".not", saved, depth+1)
		if err != nil {
			return none, err
		}
		return analysis.CohortCond{Op: analysis.CohortNot, Kids: []analysis.CohortCond{kc}}, nil
	case n.Saved != nil:
		return p.savedCond(*n.Saved, field+".saved", saved, depth)
	case n.UserProperty != nil:
		return p.parseUserCond(*n.UserProperty, field)
	}
	return p.parsePerformed(n, field)
}

// decodeCond decodes one condition node at JSON path field and checks
// that it has exactly one condition key, and count and window only where
// they belong.
func decodeCond(raw json.RawMessage, field string) (*condJSON, error) {
	var n condJSON
	if e := DecodeJSON(raw, &n); e != nil {
		if e.Field != "" {
			e.Field = field + "." + e.Field
		} else {
			e.Field = field
		}
		return nil, e
	}
	keys := 0
	for _, set := range []bool{n.And != nil, n.Or != nil, n.Not != nil, n.Performed != nil, n.NotPerformed != nil,
		n.FirstPerformed != nil, n.UserProperty != nil, n.Saved != nil} {
		if set {
			keys++
		}
	}
	if keys != 1 {
		return nil, invalid(field, "a cohort condition has exactly one of and, or, not, performed, not_performed, first_performed, user_property, saved (found %d)", keys)
	}
	if n.Count != nil && n.Performed == nil {
		return nil, invalid(field+".count", "count belongs to a performed condition")
	}
	if n.Window != nil && n.Performed == nil && n.NotPerformed == nil && n.FirstPerformed == nil {
		return nil, invalid(field+".window", "window belongs to a performed, not_performed or first_performed condition")
	}
	return &n, nil
}

// parseAndOr parses an and or or node and its conditions.
func (p *plan) parseAndOr(n *condJSON, field string, saved []string, depth int) (analysis.CohortCond, error) {
	c := analysis.CohortCond{Op: analysis.CohortAnd}
	kids, name := n.And, "and"
	if n.Or != nil {
		c.Op, kids, name = analysis.CohortOr, n.Or, "or"
	}
	if len(kids) == 0 {
		return analysis.CohortCond{}, invalid(field+"."+name, "%s needs at least one condition", name)
	}
	for i, k := range kids {
		kc, err := p.parseCond(k, fieldIdx(field+"."+name, i), saved, depth+1)
		if err != nil {
			return analysis.CohortCond{}, err
		}
		c.Kids = append(c.Kids, kc)
	}
	return c, nil
}

// parseUserCond parses a user_property condition into a user flag.
func (p *plan) parseUserCond(f Filter, field string) (analysis.CohortCond, error) {
	var none analysis.CohortCond
	if f.Source != "" && f.Source != "user" {
		return none, invalid(field+".user_property.source", "a user_property condition filters user properties; leave source out")
	}
	f.Source = "user"
	pf, err := p.parseFilter(f, field+".user_property")
	if err != nil {
		return none, err
	}
	if len(p.cohortFlags) == 64 {
		return none, invalid(field, "a cohort may have at most 64 user_property conditions")
	}
	pf.ucol = p.addCol(pf.prop, true)
	p.cohortFlags = append(p.cohortFlags, &userFlag{f: pf})
	return analysis.CohortCond{Op: analysis.CohortUserFlag, Flag: len(p.cohortFlags) - 1}, nil
}

// parsePerformed parses a performed, not_performed or first_performed
// node: its matcher, count and window; the plan's cohort range grows to
// hold the window.
func (p *plan) parsePerformed(n *condJSON, field string) (analysis.CohortCond, error) {
	var none analysis.CohortCond
	m, key := n.Performed, "performed"
	c := analysis.CohortCond{Op: analysis.CohortPerformed, Count: analysis.CountGTE, N: 1}
	switch {
	case n.NotPerformed != nil:
		m, key = n.NotPerformed, "not_performed"
		c.Count, c.N = analysis.CountEQ, 0
	case n.FirstPerformed != nil:
		m, key = n.FirstPerformed, "first_performed"
		c.Op = analysis.CohortFirstPerformed
	}
	bit, err := p.addMatcher(*m, field+"."+key, false)
	if err != nil {
		return none, err
	}
	c.Bit = bit
	if n.Count != nil {
		switch n.Count.Op {
		case "gte":
			c.Count = analysis.CountGTE
		case "lte":
			c.Count = analysis.CountLTE
		case "eq":
			c.Count = analysis.CountEQ
		default:
			return none, invalid(field+".count.op", "unknown count operator %s: want gte, lte or eq", event.Quote(n.Count.Op))
		}
		if n.Count.Value < 0 {
			return none, invalid(field+".count.value", "want a count ≥ 0, found %d", n.Count.Value)
		}
		c.N = n.Count.Value
	}
	if c.From, c.To, err = p.condWindow(n, field); err != nil {
		return none, err
	}
	from := c.From
	if c.Op == analysis.CohortFirstPerformed {
		from = minTime // the first matching event of all stored data
	}
	p.cohortFrom, p.cohortTo = min(p.cohortFrom, from), max(p.cohortTo, c.To)
	return c, nil
}

// condWindow returns the range of a node's window: the query's range
// without one.
func (p *plan) condWindow(n *condJSON, field string) (from, to int64, err error) {
	w := n.Window
	if w == nil {
		return p.from, p.to, nil
	}
	switch {
	case w.LastDays != nil && (w.From != "" || w.To != ""):
		return 0, 0, invalid(field+".window", "give either last_days or from and to")
	case w.LastDays != nil:
		if *w.LastDays < 1 || *w.LastDays > 36_600 {
			return 0, 0, invalid(field+".window.last_days", "want 1 to 36600 days, found %d", *w.LastDays)
		}
		return p.to - int64(*w.LastDays)*day, p.to, nil
	}
	var ok bool
	if from, ok = parseInstant(w.From, p.loc); !ok {
		return 0, 0, invalid(field+".window.from", "want a date YYYY-MM-DD or an RFC 3339 instant, found %s", event.Quote(w.From))
	}
	if to, ok = parseInstant(w.To, p.loc); !ok {
		return 0, 0, invalid(field+".window.to", "want a date YYYY-MM-DD or an RFC 3339 instant, found %s", event.Quote(w.To))
	}
	if to <= from {
		return 0, 0, invalid(field+".window", "window.to must be after window.from")
	}
	return from, to, nil
}

// savedCond expands the saved cohort name of the query's app.
func (p *plan) savedCond(name, field string, saved []string, depth int) (analysis.CohortCond, error) {
	if slices.Contains(saved, name) {
		return analysis.CohortCond{}, invalid(field, "saved cohort %q refers to itself (%s)", name, strings.Join(append(saved, name), " → "))
	}
	sc, err := p.snap.App().Cohort(name)
	if err != nil {
		if errors.Is(err, storage.ErrNotFound) {
			return analysis.CohortCond{}, &Error{Code: CodeNotFound, Field: field, Message: err.Error(), Err: err}
		}
		return analysis.CohortCond{}, err
	}
	return p.parseCond(sc.Definition, fmt.Sprintf("%s(saved %s)", field, name), append(saved, name), depth+1)
}

// cohort is a compiled cohort query (docs/analytics.md §7): the number of users of a
// cohort and a page of them. The universe is every user with a stored
// event or user property write; the whole store is scanned.
type cohort struct {
	e    *Engine
	p    *plan
	list *List // the page asked for (limit and offset only)
	keep int   // ids to keep: offset + limit
	ul   *analysis.UserList
}

func init() { register(kind{name: "cohort", order: 4, compile: compileCohort}) }

// compileCohort checks and compiles a cohort query.
func compileCohort(_ context.Context, e *Engine, p *plan) (compiled, error) {
	q := p.q
	if len(bytes.TrimSpace(q.Cohort)) == 0 {
		return nil, invalid("cohort", "kind cohort needs a cohort: a condition tree or a saved cohort's name")
	}
	if len(q.Where) > 0 || q.Breakdown != nil {
		return nil, invalid("where", "kind cohort takes no where or breakdown; put conditions in the cohort")
	}
	l := q.List
	if l == nil {
		l = &List{}
	}
	if l.Step != 0 || l.Dropped || l.CohortStart != "" || l.Period != 0 || l.BreakdownValue != nil || l.Series != 0 || l.Bucket != "" {
		return nil, invalid("list", "a cohort list takes only limit and offset")
	}
	keep, err := listKeep(l)
	if err != nil {
		return nil, err
	}
	if err := p.parseCohortFilter(); err != nil {
		return nil, err
	}
	return &cohort{e: e, p: p, list: l, keep: keep}, nil
}

// passes scans all stored data, visiting every user.
func (c *cohort) passes(ctx context.Context) error {
	acc, err := scanMerge(ctx, c.e, c.p, span{from: minTime, to: maxTime, allUsers: true},
		func(int) (cohortUsers, error) { return cohortUsers{&analysis.UserList{Keep: c.keep}}, nil },
		func(dst, src cohortUsers) error { return mergeOf(dst.l, src.l) })
	c.ul = acc.l
	return err
}

// finalize renders the count and the page.
func (c *cohort) finalize(context.Context) (Result, error) {
	p, l := c.p, c.list
	merge := timer()
	limit := c.keep - l.Offset
	res := &CohortResult{Kind: "cohort", Range: p.resolvedRange(), TZ: p.loc.String(), Users: c.ul.Count(),
		UserIDs: c.ul.Page(l.Offset, limit), Offset: l.Offset, Limit: limit}
	p.stats.MergeMS += merge()
	res.Stats = p.stats
	return res, nil
}

// cohortUsers is a cohort scan's accumulator: every visited user's id,
// once (on their first chunk).
type cohortUsers struct{ l *analysis.UserList }

func (c cohortUsers) Add(t *trail.Trail) {
	if t.Offset == 0 {
		c.l.Add(t.ID)
	}
}

func (c cohortUsers) Bytes() int64 { return c.l.Bytes() }

// CheckCohort validates a cohort definition (a condition tree, or a saved
// cohort's name) against app's schema and saved cohorts, as a query would
// compile it. The error is an *Error (invalid_query naming the field,
// not_found for an unknown app or saved cohort).
func (e *Engine) CheckCohort(app string, def []byte) error {
	q := &Query{Kind: "cohort", App: app, Cohort: def}
	a, err := e.store.App(app)
	if err != nil {
		return classify(err, context.Background())
	}
	snap, err := a.Acquire()
	if err != nil {
		return classify(err, context.Background())
	}
	defer snap.Release()
	p, err := e.newPlan(q, snap, e.cfg.MemoryBudget)
	if err == nil {
		err = p.parseCohortFilter()
	}
	if err != nil {
		return classify(err, context.Background())
	}
	if p.cohort == nil {
		return invalid("cohort", "the cohort definition is empty")
	}
	return nil
}

// writeTable prints the cohort's size and page of user ids.
func (r *CohortResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "cohort (range %s .. %s, %s): %d users\n", r.Range.From, r.Range.To, r.TZ, r.Users)
	writeIDs(w, r.UserIDs, r.Offset, r.Users)
}

// writeCSV writes one row per listed user id.
func (r *CohortResult) writeCSV(cw *csv.Writer) { writeIDsCSV(cw, r.UserIDs) }
