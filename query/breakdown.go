package query

import (
	"cmp"
	"context"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/query/analysis"
)

// Breakdown limits (docs/analytics.md §4): the default number of values kept when a
// breakdown has no limit, and the largest limit accepted.
const (
	DefaultBreakdownLimit = 25
	MaxBreakdownLimit     = 10_000
)

// otherKey is the key of the merged "(other)" group: an unset value with
// Bits 1, which no real value has (unset values have Bits 0).
var otherKey = analysis.Key{Bits: 1}

// breakdown is a validated breakdown: where the key comes from, the
// property's column and the limit.
type breakdown struct {
	src   analysis.KeySource
	col   *column
	limit int
}

// parseBreakdown validates the query's breakdown; nil without one.
func (p *plan) parseBreakdown() (*breakdown, error) {
	b := p.q.Breakdown
	if b == nil {
		return nil, nil
	}
	user := false
	switch b.Source {
	case "", "event":
	case "user":
		user = true
	default:
		return nil, invalid("breakdown.source", "unknown source %s: want event or user", event.Quote(b.Source))
	}
	if b.Property == "" {
		return nil, invalid("breakdown.property", "property is required")
	}
	if _, ok := p.propType(b.Property, user); !ok {
		return nil, p.unknownProp("breakdown.property", b.Property, user)
	}
	limit := b.Limit
	if limit == 0 {
		limit = DefaultBreakdownLimit
	}
	if limit < 1 || limit > MaxBreakdownLimit {
		return nil, invalid("breakdown.limit", "want 1 to %d values, found %d", MaxBreakdownLimit, b.Limit)
	}
	bd := &breakdown{limit: limit}
	idx := p.addCol(b.Property, user)
	if user {
		bd.src = analysis.KeySource{From: analysis.KeyUser, Index: idx}
		bd.col = p.ucols[idx]
	} else {
		bd.src = analysis.KeySource{From: analysis.KeyEvent, Index: idx}
		bd.col = p.cols[idx]
	}
	return bd, nil
}

// label renders a breakdown key as it appears in results.
func (p *plan) label(b *breakdown, k analysis.Key) string {
	if k == otherKey {
		return otherLabel
	}
	return renderValue(k, b.col.typ, b.col.dict, p.loc)
}

// ranked is the outcome of a breakdown limit: the kept keys in result
// order and whether the others were merged into "(other)".
type ranked struct {
	order []analysis.Key
	kept  map[analysis.Key]bool
	other bool
}

// rank orders keys by total descending, then label ascending (then by
// key, should a string value look like "(none)"), and keeps the first
// limit. It returns ctx.Err() once ctx is done (checked every
// checkEvery keys).
func (p *plan) rank(ctx context.Context, b *breakdown, keys []analysis.Key, totals []float64) (ranked, error) {
	idx := make([]int, len(keys))
	labels := make([]string, len(keys))
	for i := range idx {
		if i%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return ranked{}, err
			}
		}
		idx[i] = i
		labels[i] = p.label(b, keys[i])
	}
	slices.SortFunc(idx, func(x, y int) int {
		kx, ky := keys[x], keys[y]
		return cmp.Or(cmp.Compare(totals[y], totals[x]), cmp.Compare(labels[x], labels[y]),
			cmp.Compare(b2i(kx.Set), b2i(ky.Set)), cmp.Compare(kx.Bits, ky.Bits))
	})
	r := ranked{kept: map[analysis.Key]bool{}}
	for n, i := range idx {
		if n == b.limit {
			r.other = true
			break
		}
		r.order = append(r.order, keys[i])
		r.kept[keys[i]] = true
	}
	return r, nil
}

// checkEvery is how many keys or rows a result loop handles between
// checks of its context.
const checkEvery = 1024

// group maps a key to itself if kept, else to otherKey.
func (r *ranked) group(k analysis.Key) analysis.Key {
	if r.kept[k] {
		return k
	}
	return otherKey
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
