package query

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/segment"
)

func init() { storage.SetWhereCompiler(CompileDeleteWhere) }

// CompileDeleteWhere compiles the "where" of an events deletion
// (storage.EventMatch.Where, docs/storage.md §7): a JSON array of
// docs/analytics.md §3 filters on event properties (source "event"), typed
// against props, the app's event properties, with the semantics of a
// series' matcher (every filter must hold; dates without an offset in
// UTC). It is the storage.WhereCompiler this package registers. Errors:
// *Error invalid_query naming the field ("where[1].value").
func CompileDeleteWhere(where string, props []event.PropType) (storage.WhereFilter, error) {
	var fs []Filter
	dec := json.NewDecoder(strings.NewReader(where))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fs); err != nil {
		return nil, invalid("where", "want a JSON array of filters {\"property\", \"op\", \"value\"}: %v", err)
	}
	p := &plan{q: &Query{}, snap: &storage.Version{Catalog: &storage.Catalog{EventProps: props}}, loc: time.UTC}
	w := &deleteWhere{}
	for i, f := range fs {
		field := fmt.Sprintf("where[%d]", i)
		if f.Source != "" && f.Source != "event" {
			return nil, invalid(field+".source", "a deletion filters event properties only, found source %s", event.Quote(f.Source))
		}
		pf, err := p.parseFilter(f, field)
		if err != nil {
			return nil, err
		}
		w.fs = append(w.fs, pf)
	}
	return w, nil
}

// deleteWhere is a compiled deletion filter (storage.WhereFilter).
type deleteWhere struct{ fs []*filter }

// Compile implements storage.WhereFilter with the scan's predicates
// (segmentPreds): every filter must hold.
func (w *deleteWhere) Compile(meta *segment.Meta, col func(prop int) int) (func(*segment.Block, int) bool, bool, error) {
	preds, dead, err := segmentPreds(w.fs, "", meta, col)
	if err != nil || dead {
		return nil, dead, err
	}
	return func(b *segment.Block, r int) bool {
		for j := range preds {
			if !preds[j].test(&b.Props[preds[j].col], r) {
				return false
			}
		}
		return true
	}, false, nil
}

// ResolveRange resolves a docs/analytics.md §2 range — {"from", "to"}
// (dates or RFC 3339 instants; dates at midnight in tz) or {"last"}
// (relative to now, UTC µs) — to [from, to) in UTC µs, as a query with
// that range and time zone (an IANA name; "" is UTC) would: for the
// range of an events deletion (docs/storage.md §7). Errors: *Error
// invalid_query naming the field ("range.from").
func ResolveRange(r Range, tz string, now int64) (from, to int64, err error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := event.LoadZone(tz)
	if err != nil {
		return 0, 0, invalid("tz", "%v", err)
	}
	if r == (Range{}) {
		return 0, 0, invalid("range", `a range is required: {"from", "to"} or {"last"}`)
	}
	p := &plan{loc: loc, now: now}
	if err := p.resolveRange(&r); err != nil {
		return 0, 0, err
	}
	return p.from, p.to, nil
}
