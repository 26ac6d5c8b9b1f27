package query

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// kind is one query kind: compile checks the query of a plan and
// compiles it (matchers, columns, the analysis kernels' specs); the
// compiled query's passes then scan (each pass through scanMerge), and
// finalize ranks, runs the passes that depend on the ranking (an
// "(other)" recomputed, a list under a breakdown value) and renders the
// Result.
//
// Adding a kind NAME touches these places:
//
//  1. query/NAME.go, the kind's one Go file, registers it: func init() {
//     register(kind{name: "NAME", order: N, compile: compileNAME}) }, N
//     the next free order (the kinds' order in Kinds and in the "unknown
//     kind" message).
//  2. In that file, compileNAME validates the kind's request fields
//     (errors from invalid, naming the JSON field) and returns its
//     compiled type, whose passes run its scans (each through scanMerge
//     or passRunner) and whose finalize ranks, runs the passes that need
//     the ranking and builds the result.
//  3. In that file too, its exported result type NAMEResult (JSON field
//     names are the API's: a "kind" field, Range, TZ, Warnings, Stats
//     and, when it can list users, List) has the Result methods:
//     ResultKind, parts, writeTable (WriteTable's form) and writeCSV
//     (WriteCSV's rows; the header, a var beside it).
//  4. Its request fields, in Query (query/spec.go) or AnalysisQuery
//     (query/kinds.go), embedded in Query: they are top-level fields
//     of the JSON request, so they live in the one request struct (add
//     fields, never rename them).
//  5. The UI: server/ui/kinds/NAME.js, the module exporting {kind,
//     label, fields, common, defaults, Builder, Result} (the query
//     builder and the result view; its contract is at the top of
//     server/ui/kinds/index.js), and its import and entry in KINDS in
//     server/ui/kinds/index.js (the tab order).
//
// The server needs nothing more (its metrics take their kinds from
// Kinds; its CSV output and stats go through Result). The kind's
// contract belongs in docs/analytics.md and its CSV columns in
// docs/queries.md.
type kind struct {
	name string
	// order places the kind in Kinds and in error messages, which list
	// the kinds by ascending order; unique per kind.
	order   int
	compile func(ctx context.Context, e *Engine, p *plan) (compiled, error)
}

// compiled is a query compiled by its kind, run once: passes, then
// finalize.
type compiled interface {
	// passes runs the kind's main scan passes.
	passes(ctx context.Context) error
	// finalize ranks and renders the result, running the passes that need
	// the main passes' answer first.
	finalize(ctx context.Context) (Result, error)
}

// kinds are the query kinds, by ascending order. Each kind's file adds its
// own from its init (register): a package-level table would be an
// initialization cycle, since the compile functions reach newPlan, which
// looks kinds up.
var kinds []kind

// register adds k to kinds, keeping them by ascending order, so that the
// files' init order does not matter. It panics on a kind whose name or
// order another kind has (a programming error, found at start-up).
func register(k kind) {
	for _, o := range kinds {
		if o.name == k.name || o.order == k.order {
			panic(fmt.Sprintf("query: kind %q (order %d) registered twice or with the order of %q", k.name, k.order, o.name))
		}
	}
	kinds = append(kinds, k)
	slices.SortFunc(kinds, func(a, b kind) int { return cmp.Compare(a.order, b.order) })
}

// kindNamed returns the kind of that name (false: none).
func kindNamed(name string) (kind, bool) {
	for _, k := range kinds {
		if k.name == name {
			return k, true
		}
	}
	return kind{}, false
}

// Kinds returns the names of the query kinds ("trend", "funnel", …), in a
// fixed order; the slice is the caller's.
func Kinds() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

// kindNameList lists the query kinds for error messages: "trend, funnel, …
// or attribution".
func kindNameList() string {
	names := Kinds()
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// runKind compiles q's plan by its kind and runs it.
func (e *Engine) runKind(ctx context.Context, p *plan) (Result, error) {
	k, _ := kindNamed(p.q.Kind) // newPlan checked the name
	c, err := k.compile(ctx, e, p)
	if err != nil {
		return nil, err
	}
	if err := c.passes(ctx); err != nil {
		return nil, err
	}
	return c.finalize(ctx)
}
