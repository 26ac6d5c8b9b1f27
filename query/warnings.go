package query

import (
	"fmt"
	"slices"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage"
)

// maxWarnings bounds the warnings of one result (a filter with thousands
// of unknown values gets a few, not thousands).
const maxWarnings = 20

// WarningsOf returns a pointer into res to its warnings, or nil for a nil
// res.
func WarningsOf(res Result) *[]Warning {
	if res == nil {
		return nil
	}
	return res.parts().warnings
}

// warnings returns the plan's warnings (docs/analytics.md §9), in query order: each
// matcher's event name that no events segment of the app holds, and each
// value of a string eq, neq, in or not_in filter that the property holds in
// no segment of the app (events segments for event properties, users
// segments for user properties). "Nowhere in the app" is over the whole
// snapshot, not the query range: an event that merely did not happen in
// the range is a true zero, not a typo. The segments' footers answer
// (sorted dictionaries, binary search; a name is usually found in the
// first segment tried); a segment that cannot be opened ends the check
// without a warning, as the query's own error is not this function's to
// give.
func (p *plan) warnings() []Warning {
	var out []Warning
	add := func(w Warning) {
		if len(out) < maxWarnings {
			out = append(out, w)
		}
	}
	seenFilter := map[*filter]bool{}
	checkFilter := func(f *filter) {
		if seenFilter[f] || f.typ != event.TypeString {
			return
		}
		seenFilter[f] = true
		switch f.op {
		case "eq", "neq", "in", "not_in":
		default:
			return
		}
		for i, v := range f.vals {
			if ok, err := p.valueSeen(f.prop, f.user, v.Str); err == nil && !ok {
				kind := propSource(f.user)
				add(Warning{Code: WarnUnknownValue, Field: f.valFields[i],
					Message: fmt.Sprintf("no %s in app %q has the value %s for property %s: the filter %s matches %s",
						kind, p.q.App, event.Quote(v.Str), event.Quote(f.prop), f.op, matchesWhat(f.op, kind))})
			}
		}
	}
	for _, f := range p.global {
		checkFilter(f)
	}
	for _, m := range p.matchers {
		if m.event != AnyEvent {
			if ok, err := p.eventSeen(m.event); err == nil && !ok {
				add(Warning{Code: WarnUnknownEvent, Field: m.field + ".event",
					Message: fmt.Sprintf("no event named %s occurs in app %q: it matches nothing", event.Quote(m.event), p.q.App)})
			}
		}
		for _, f := range m.efs {
			checkFilter(f)
		}
		for _, f := range m.ufs {
			checkFilter(f)
		}
	}
	for _, uf := range p.cohortFlags {
		checkFilter(uf.f)
	}
	return out
}

func propSource(user bool) string {
	if user {
		return "user"
	}
	return "event"
}

// matchesWhat says what a filter on a value held nowhere matches.
func matchesWhat(op, kind string) string {
	if op == "neq" || op == "not_in" {
		return "every " + kind
	}
	return "no " + kind
}

// eventSeen reports whether some events segment of the snapshot holds an
// event named name.
func (p *plan) eventSeen(name string) (bool, error) {
	for _, ref := range p.snap.Segments {
		if ref.Kind != storage.KindEvents || ref.Rows == 0 {
			continue
		}
		r, err := p.snap.Reader(ref)
		if err != nil {
			return false, err
		}
		if slices.Contains(r.Meta().EventNames, name) { // not sorted in every format version
			return true, nil
		}
	}
	return false, nil
}

// valueSeen reports whether some segment of the snapshot holds the string
// value v for the event (user false) or user property prop.
func (p *plan) valueSeen(prop string, user bool, v string) (bool, error) {
	kind := storage.KindEvents
	if user {
		kind = storage.KindUsers
	}
	for _, ref := range p.snap.Segments {
		if ref.Kind != kind || ref.Rows == 0 {
			continue
		}
		r, err := p.snap.Reader(ref)
		if err != nil {
			return false, err
		}
		meta := r.Meta()
		if mi := propIndex(meta, prop); mi >= 0 {
			if slices.Contains(meta.Props[mi].Dict, v) {
				return true, nil
			}
		}
	}
	return false, nil
}
