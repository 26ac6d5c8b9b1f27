package storage

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
)

// Schema describes what an app holds, for query pickers (the server's
// GET /api/apps/{app}/schema): its event names with counts and its
// properties with types and value summaries.
type Schema struct {
	App     string `json:"app"`
	TZ      string `json:"tz"`       // the app's default time zone (IANA); "" = UTC
	Events  int64  `json:"events"`   // rows of events segments
	MinTime int64  `json:"min_time"` // UTC µs of the earliest event; 0 without events
	MaxTime int64  `json:"max_time"` // UTC µs of the latest event; 0 without events
	// EventNames lists every event name with its row count, by count
	// descending, then name.
	EventNames []NameCount `json:"event_names"`
	// EventProps and UserProps list the event and user properties in the
	// order of their first sighting (the catalog's order). The reserved
	// insert_id column is left out.
	EventProps []PropSummary `json:"event_props"`
	UserProps  []PropSummary `json:"user_props"`
}

// NameCount is a value (an event name, or a property value rendered as a
// string) with the number of rows that hold it.
type NameCount struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// PropSummary summarises one property over an app's segments. For user
// properties the counts are of property writes (rows of users segments),
// not of distinct users.
type PropSummary struct {
	Name string     `json:"name"`
	Type event.Type `json:"type"`
	// Count is the number of rows with the property set.
	Count int64 `json:"count"`
	// Distinct is the number of distinct values (string and bool only; 0
	// for the other types).
	Distinct int64 `json:"distinct,omitempty"`
	// Top holds the most frequent values (string and bool; bools as
	// "true"/"false"), by count descending, then value; at most topN.
	Top []NameCount `json:"top,omitempty"`
	// Min and Max are the smallest and largest value of an int, float or
	// time property (times in UTC µs); nil for other types or when no row
	// has a value.
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// propAcc accumulates one property across segments.
type propAcc struct {
	sum      PropSummary
	counts   map[string]int64 // string and bool values
	min, max float64
	hasRange bool
}

// Schema summarises the snapshot: event name counts come from segment
// footers (no data read); property summaries read each property's column
// in every block of every segment (one chunk per block, the user, time and
// event chunks come with it), counting dictionary codes per segment and
// merging by value. topN ≤ 0 means 20. The cost is one read of every
// property column, so callers should cache the result per catalog
// Generation. Errors are those of opening or reading a segment (I/O or
// corruption) and ctx.Err(); the returned Schema is newly allocated and
// owned by the caller.
func (s *Version) Schema(ctx context.Context, topN int) (*Schema, error) {
	if topN <= 0 {
		topN = 20
	}
	m := s.Catalog
	out := &Schema{App: m.App, TZ: m.TZ, Events: m.Rows(KindEvents), EventNames: []NameCount{}}
	if lo, hi, ok := m.TimeRange(KindEvents); ok {
		out.MinTime, out.MaxTime = lo, hi
	}
	names := map[string]int64{}
	accs := map[SegmentKind]map[string]*propAcc{KindEvents: {}, KindUsers: {}}
	for kind, props := range map[SegmentKind][]event.PropType{KindEvents: m.EventProps, KindUsers: m.UserProps} {
		for _, p := range props {
			accs[kind][p.Name] = &propAcc{sum: PropSummary{Name: p.Name, Type: p.Type}}
		}
	}
	var blk segment.Block
	var codeCounts []int64
	for _, ref := range m.Segments {
		r, err := s.Reader(ref)
		if err != nil {
			return nil, err
		}
		meta := r.Meta()
		if ref.Kind == KindEvents {
			for c, n := range meta.EventNames {
				names[n] += meta.EventRows[c]
			}
		}
		for pi, pm := range meta.Props {
			acc := accs[ref.Kind][pm.Name]
			// An int column of a property widened to float since (docs/analytics.md §1)
			// counts like the float ones.
			if acc == nil || (acc.sum.Type != pm.Type && !widened(pm.Type, acc.sum.Type)) {
				continue
			}
			if codeCounts, err = acc.addColumn(ctx, r, pi, &blk, codeCounts); err != nil {
				return nil, fmt.Errorf("schema of app %q, segment %s, property %q: %w", m.App, ref.File, pm.Name, err)
			}
		}
	}
	for n, c := range names {
		out.EventNames = append(out.EventNames, NameCount{n, c})
	}
	sortCounts(out.EventNames)
	out.EventProps = finishProps(m.EventProps, accs[KindEvents], topN)
	out.UserProps = finishProps(m.UserProps, accs[KindUsers], topN)
	return out, nil
}

// addColumn reads property column pi of every block of r into acc. counts is
// scratch (per dictionary code) returned for reuse.
func (acc *propAcc) addColumn(ctx context.Context, r *segment.Reader, pi int, blk *segment.Block, counts []int64) ([]int64, error) {
	meta := r.Meta()
	pm := &meta.Props[pi]
	if pm.Type == event.TypeString {
		counts = slices.Grow(counts[:0], len(pm.Dict))[:len(pm.Dict)]
		clear(counts)
	}
	var bools [2]int64
	props := []int{pi}
	for b := range meta.Blocks {
		if err := ctx.Err(); err != nil {
			return counts, err
		}
		if err := r.ReadBlock(b, props, blk); err != nil {
			return counts, err
		}
		pd := &blk.Props[0]
		for row := range blk.Rows {
			if pd.Present[row>>6]&(1<<(row&63)) == 0 {
				continue
			}
			acc.sum.Count++
			switch pm.Type {
			case event.TypeString:
				counts[pd.Strs[row]]++
			case event.TypeBool:
				bools[pd.Ints[row]&1]++
			case event.TypeInt, event.TypeTime:
				acc.observe(float64(pd.Ints[row]))
			case event.TypeFloat:
				acc.observe(pd.Floats[row])
			}
		}
	}
	switch pm.Type {
	case event.TypeString:
		if acc.counts == nil {
			acc.counts = make(map[string]int64, len(pm.Dict))
		}
		for code, n := range counts {
			if n > 0 {
				acc.counts[pm.Dict[code]] += n
			}
		}
	case event.TypeBool:
		if acc.counts == nil {
			acc.counts = map[string]int64{}
		}
		for v, n := range bools {
			if n > 0 {
				acc.counts[[2]string{"false", "true"}[v]] += n
			}
		}
	}
	return counts, nil
}

func (acc *propAcc) observe(v float64) {
	if math.IsNaN(v) {
		return
	}
	if !acc.hasRange || v < acc.min {
		acc.min = v
	}
	if !acc.hasRange || v > acc.max {
		acc.max = v
	}
	acc.hasRange = true
}

func finishProps(order []event.PropType, accs map[string]*propAcc, topN int) []PropSummary {
	out := []PropSummary{}
	for _, p := range order {
		acc := accs[p.Name]
		if acc == nil {
			continue
		}
		sum := acc.sum
		if acc.counts != nil {
			sum.Distinct = int64(len(acc.counts))
			for v, n := range acc.counts {
				sum.Top = append(sum.Top, NameCount{v, n})
			}
			sortCounts(sum.Top)
			if len(sum.Top) > topN {
				sum.Top = slices.Clip(sum.Top[:topN])
			}
		}
		if acc.hasRange {
			lo, hi := acc.min, acc.max
			sum.Min, sum.Max = &lo, &hi
		}
		out = append(out, sum)
	}
	return out
}

// sortCounts orders by count descending, then name ascending.
func sortCounts(s []NameCount) {
	slices.SortFunc(s, func(a, b NameCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}
