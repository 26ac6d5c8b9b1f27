package query

import (
	"context"
	"sort"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/trail"
)

// trendList is a validated trend list (docs/analytics.md §7: trend {series, bucket}):
// the users behind one number of a trend result.
type trendList struct {
	series analysis.TrendSeries
	// from, to: the events that count, [from, to) UTC µs — the bucket's
	// part of the query range, or the whole range for the range total. For
	// wau and mau the window [E−W, E) ending at the bucket's end E (for
	// the total, the union of the buckets' windows).
	from, to int64
	page     int // ids to keep (offset + limit)
	// ends and window: for the range total of wau and mau, the buckets'
	// window ends E and the window W; an event counts if it lies in some
	// [E−W, E).
	ends   []int64
	window int64
}

// parseTrendList validates the query's list against a trend plan: series
// (0-based index into the query's series), bucket (the start of a bucket
// as in the result, or any instant inside it; empty for the range total)
// and breakdown_value. It runs before the scan.
func (p *plan) parseTrendList(spec *analysis.TrendSpec) (*trendList, error) {
	l := p.q.List
	if l.Step != 0 || l.Dropped || l.CohortStart != "" || l.Period != 0 {
		return nil, invalid("list", "a trend list takes series, bucket and breakdown_value, not step, dropped, cohort_start or period")
	}
	if l.Series < 0 || l.Series >= len(spec.Series) {
		return nil, invalid("list.series", "want a series index from 0 to %d, found %d", len(spec.Series)-1, l.Series)
	}
	keep, err := listKeep(l)
	if err != nil {
		return nil, err
	}
	tl := &trendList{series: spec.Series[l.Series], from: p.from, to: p.to, page: keep}
	if l.Bucket != "" {
		b := spec.Bounds
		t, ok := parseInstant(l.Bucket, p.loc)
		if !ok || t < b[0] || t >= b[len(b)-1] {
			return nil, invalid("list.bucket", "want the start of a bucket of the range (%s to %s), found %q",
				formatTime(b[0], p.loc), formatTime(b[len(b)-1], p.loc), l.Bucket)
		}
		i := 0
		for b[i+1] <= t {
			i++
		}
		tl.from, tl.to = max(b[i], p.from), min(b[i+1], p.to)
		if w := tl.series.Math.Window(); w > 0 {
			tl.from = tl.to - w
		}
	} else if w := tl.series.Math.Window(); w > 0 {
		// The range total counts the users of any bucket's window
		// [E−W, E), E = min(bucket end, to); the windows may not touch.
		b := spec.Bounds
		tl.ends, tl.window = make([]int64, len(b)-1), w
		for i := range tl.ends {
			tl.ends[i] = min(b[i+1], p.to)
		}
		tl.from = tl.ends[0] - w
	}
	return tl, nil
}

// listTrend scans for the users of a trend list: users with a matching
// event of the series in [tl.from, tl.to) (for a property math, one that
// has the property set), whose breakdown value (the event's, or the
// user's) is the listed one. So for users, wau and mau the list's count is
// the number shown; for the other maths it is the users whose events make
// up the value. r is the ranking of the listed series' breakdown values
// (nil without a breakdown): "(other)" lists the values it did not keep.
func (e *Engine) listTrend(ctx context.Context, p *plan, tl *trendList, bd *breakdown, r *ranked) (*ListResult, error) {
	l := p.q.List
	var want *string
	if l.BreakdownValue != nil {
		if bd == nil {
			return nil, invalid("list.breakdown_value", "the query has no breakdown")
		}
		want = l.BreakdownValue
	}
	// Every listed user is visited in full: no thinning of rows.
	p.thin = storage.Thin{}
	acc, err := scanMerge(ctx, e, p, span{from: tl.from, to: tl.to}, func(int) (*trendLister, error) {
		return tl.lister(p, bd, r, want), nil
	}, func(dst, src *trendLister) error { return mergeOf(dst.ul, src.ul) })
	if err != nil {
		return nil, err
	}
	return listResult(l, acc.ul, p.snap.Persons()), nil
}

// trendLister is one worker's accumulator of a trend's list: the users
// with an event that puts them in it (trendList.match), each once.
type trendLister struct {
	tl    *trendList
	bd    *breakdown
	keep  func(analysis.Key) bool // nil: any breakdown value
	cache map[analysis.Key]bool   // this worker's keys, decided once
	ul    *analysis.UserList
	found bool // the user of the current trail is listed
}

// lister returns one worker's accumulator of the list; want is the
// list's breakdown value (nil: any).
func (tl *trendList) lister(p *plan, bd *breakdown, r *ranked, want *string) *trendLister {
	l := &trendLister{tl: tl, bd: bd, cache: map[analysis.Key]bool{}, ul: &analysis.UserList{Keep: tl.page}}
	if want != nil {
		l.keep = func(k analysis.Key) bool {
			v, ok := l.cache[k]
			if !ok {
				if *want == otherLabel {
					v = !r.kept[k]
				} else {
					v = r.kept[k] && p.label(bd, k) == *want
				}
				l.cache[k] = v
			}
			return v
		}
	}
	return l
}

func (l *trendLister) Add(t *trail.Trail) {
	if t.Offset == 0 {
		l.found = false
	}
	if !l.found && l.tl.match(t, l.bd, l.keep) {
		l.found = true
		l.ul.Add(t.ID)
	}
}

func (l *trendLister) Bytes() int64 { return l.ul.Bytes() + int64(len(l.cache))*24 }

// match reports whether one chunk of a trail has an event that puts the
// user in the list.
func (tl *trendList) match(t *trail.Trail, bd *breakdown, keep func(analysis.Key) bool) bool {
	if keep != nil && bd.src.From == analysis.KeyUser && !keep(t.User[bd.src.Index]) {
		return false
	}
	bit := uint64(1) << tl.series.Bit
	for i, ts := range t.Times {
		if ts < tl.from || t.Mask[i]&bit == 0 {
			continue
		}
		if ts >= tl.to {
			return false
		}
		if tl.ends != nil {
			if b := sort.Search(len(tl.ends), func(i int) bool { return tl.ends[i] > ts }); b == len(tl.ends) || ts < tl.ends[b]-tl.window {
				continue
			}
		}
		if tl.series.Math.NeedsProperty() && !t.Cols[tl.series.Col].Set[i] {
			continue
		}
		if keep != nil && bd.src.From == analysis.KeyEvent {
			c := &t.Cols[bd.src.Index]
			if !keep(analysis.Key{Bits: c.Bits[i], Set: c.Set[i]}) {
				continue
			}
		}
		return true
	}
	return false
}
