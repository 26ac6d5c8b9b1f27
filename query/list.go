package query

import (
	"github.com/spurdb/spur/identity"
	"github.com/spurdb/spur/query/analysis"
)

// List page limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10_000
)

// listKeep validates a list's page and returns the number of ids each
// accumulator must keep (offset + limit).
func listKeep(l *List) (int, error) {
	limit := l.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	if limit < 1 || limit > MaxListLimit {
		return 0, invalid("list.limit", "want 1 to %d ids per page, found %d", MaxListLimit, l.Limit)
	}
	if l.Offset < 0 || l.Offset > analysis.MaxListKeep-limit {
		return 0, invalid("list.offset", "want 0 to %d, found %d", analysis.MaxListKeep-limit, l.Offset)
	}
	return l.Offset + limit, nil
}

// pickList returns the list a query asked for: the list over all users,
// or, with a breakdown_value, that group's (an empty list when no group
// has the value). groups(i) returns group i's key and list.
func (p *plan) pickList(bd *breakdown, all *analysis.UserList, n int, groups func(i int) (analysis.Key, *analysis.UserList)) (*analysis.UserList, error) {
	want := p.q.List.BreakdownValue
	if want == nil {
		return all, nil
	}
	if bd == nil {
		return nil, invalid("list.breakdown_value", "the query has no breakdown")
	}
	for i := range n {
		k, l := groups(i)
		if p.label(bd, k) == *want {
			return l, nil
		}
	}
	return &analysis.UserList{}, nil
}

// listResult renders a page of l, whose ids are person ids (the scan
// joins persons): with q.DistinctIDs each with its distinct ids, from
// persons (the query's id graph; nil: every id is a person of its own).
func listResult(q *List, l *analysis.UserList, persons *identity.Snapshot) *ListResult {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	r := &ListResult{Users: l.Count(), UserIDs: l.Page(q.Offset, limit), Offset: q.Offset, Limit: limit,
		ListCoords: q.ListCoords}
	if q.DistinctIDs {
		r.Persons = make([]ListPerson, len(r.UserIDs))
		for i, id := range r.UserIDs {
			r.Persons[i] = ListPerson{ID: id, DistinctIDs: []string{id}}
			if persons == nil {
				continue
			}
			if p := persons.LookupString(id); p != nil {
				r.Persons[i].DistinctIDs = p.DistinctIDs
			}
		}
	}
	return r
}
