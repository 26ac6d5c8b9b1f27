package query

import (
	"fmt"
	"time"

	"github.com/spurdb/spur/storage"
	"github.com/spurdb/spur/storage/segment"
)

// AnyEvent is the matcher event name that matches every event.
const AnyEvent = "$any"

// plan is a validated query: resolved zone, range, and matchers numbered
// by their bit in the per-event mask.
type plan struct {
	q    *Query
	snap *storage.Snapshot
	loc  *time.Location
	now  int64 // UTC µs

	from, to  int64 // query range [from, to), UTC µs
	dataStart int64 // earliest stored event, UTC µs
	dataEnd   int64 // latest stored event + 1 µs; 0 when the app has no events
	hasData   bool

	matchers []string // event name per matcher bit
	stats    Stats
}

func (e *Engine) newPlan(q *Query, snap *storage.Snapshot) (*plan, error) {
	switch q.Kind {
	case "trend", "funnel", "retention":
	case "cohort":
		return nil, invalid("kind", "kind %q is not implemented yet", q.Kind)
	case "":
		return nil, invalid("kind", "kind is required: trend, funnel or retention")
	default:
		return nil, invalid("kind", "unknown kind %q: want trend, funnel or retention", q.Kind)
	}
	if len(q.Where) > 0 {
		return nil, invalid("where", "property filters are not implemented yet")
	}
	if len(q.Cohort) > 0 {
		return nil, invalid("cohort", "cohort filters are not implemented yet")
	}
	if q.Breakdown != nil {
		return nil, invalid("breakdown", "breakdowns are not implemented yet")
	}
	p := &plan{q: q, snap: snap}
	tz := q.TZ
	if tz == "" {
		tz = snap.Manifest.TZ
	}
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, invalid("tz", "unknown time zone %q: want an IANA name such as Europe/Berlin", tz)
	}
	p.loc = loc
	if q.Now != "" {
		t, err := time.Parse(time.RFC3339Nano, q.Now)
		if err != nil {
			return nil, invalid("now", "want an RFC 3339 instant, found %q", q.Now)
		}
		p.now = t.UnixMicro()
	} else {
		p.now = e.cfg.Now().UnixMicro()
	}
	if lo, hi, ok := snap.Manifest.TimeRange(storage.KindEvents); ok {
		p.dataStart, p.dataEnd, p.hasData = lo, hi+1, true
	}
	if q.Range == nil {
		if !p.hasData {
			p.from, p.to = p.now, p.now+1
		} else {
			p.from = startOfDay(p.dataStart, loc)
			p.to = startOfDay(p.dataEnd-1, loc)
			p.to = time.UnixMicro(p.to).In(loc).AddDate(0, 0, 1).UnixMicro()
		}
	} else {
		var ok bool
		if p.from, ok = parseInstant(q.Range.From, loc); !ok {
			return nil, invalid("range.from", "want a date YYYY-MM-DD or an RFC 3339 instant, found %q", q.Range.From)
		}
		if p.to, ok = parseInstant(q.Range.To, loc); !ok {
			return nil, invalid("range.to", "want a date YYYY-MM-DD or an RFC 3339 instant, found %q", q.Range.To)
		}
		if p.to <= p.from {
			return nil, invalid("range", "range.to (%s) must be after range.from (%s)", q.Range.To, q.Range.From)
		}
	}
	return p, nil
}

func startOfDay(us int64, loc *time.Location) int64 {
	t := time.UnixMicro(us).In(loc)
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc).UnixMicro()
}

// addMatcher validates m and gives it the next mask bit.
func (p *plan) addMatcher(m Matcher, field string) (bit int, err error) {
	if m.Event == "" {
		return 0, invalid(field+".event", "event is required (an event name, or %q for every event)", AnyEvent)
	}
	if len(m.Where) > 0 {
		return 0, invalid(field+".where", "property filters are not implemented yet")
	}
	if len(p.matchers) == 64 {
		return 0, invalid(field, "a query may have at most 64 matchers")
	}
	p.matchers = append(p.matchers, m.Event)
	return len(p.matchers) - 1, nil
}

// masks compiles the matchers for one segment: per event code, the bits of
// the matchers its event name satisfies. This is the plan-time filter
// compilation; the scan then tests one table lookup per event.
func (p *plan) masks(meta *segment.Meta) []uint64 {
	out := make([]uint64, len(meta.EventNames))
	for bit, name := range p.matchers {
		for code, en := range meta.EventNames {
			if name == AnyEvent || name == en {
				out[code] |= 1 << bit
			}
		}
	}
	return out
}

func fieldIdx(name string, i int) string { return fmt.Sprintf("%s[%d]", name, i) }

func (p *plan) resolvedRange() ResolvedRange {
	return ResolvedRange{From: formatTime(p.from, p.loc), To: formatTime(p.to, p.loc)}
}

// incomplete reports whether a bucket ending at end (exclusive, UTC µs)
// extends past the end of the data or past now (spec §2).
func (p *plan) incomplete(end int64) bool {
	return !p.hasData || end > p.dataEnd || end > p.now
}
