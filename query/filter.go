package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/storage/segment"
	"github.com/spurdb/spur/trail"
)

// filter is a validated property filter (docs/analytics.md §3): the property, its
// type, the operator and the constants coerced to that type.
type filter struct {
	prop string
	user bool // source "user": the user's current value
	typ  event.Type
	op   string
	vals []event.Value // coerced constants (one, several for in/not_in, none for is_set/is_not_set)
	// valFields are the JSON paths of vals ("where[0].value",
	// "steps[1].where[0].value[2]"), for warnings
	valFields []string
	ucol      int // user filters: index of the user value in the trail
}

// filterOps are the operators of docs/analytics.md §3.
var filterOps = []string{"eq", "neq", "in", "not_in", "gt", "gte", "lt", "lte", "contains", "not_contains", "is_set", "is_not_set"}

// parseFilter validates f (at JSON path field) against the app's property
// types: an unknown property, source or operator, a missing value, or a
// value that cannot be coerced to the property's type is invalid_query
// naming the field. Dates and times without an offset are read in loc.
func (p *plan) parseFilter(f Filter, field string) (*filter, error) {
	out := &filter{prop: f.Property, op: f.Op}
	switch f.Source {
	case "", "event":
	case "user":
		out.user = true
	default:
		return nil, invalid(field+".source", "unknown source %s: want event or user", event.Quote(f.Source))
	}
	if f.Property == "" {
		return nil, invalid(field+".property", "property is required")
	}
	t, ok := p.propType(f.Property, out.user)
	if !ok {
		return nil, p.unknownProp(field+".property", f.Property, out.user)
	}
	out.typ = t
	if !slices.Contains(filterOps, f.Op) {
		return nil, invalid(field+".op", "unknown operator %s: want one of %s", event.Quote(f.Op), strings.Join(filterOps, ", "))
	}
	if (f.Op == "contains" || f.Op == "not_contains") && t != event.TypeString {
		return nil, invalid(field+".op", "%s needs a string property; %s is %s", f.Op, event.Quote(f.Property), t)
	}
	switch f.Op {
	case "is_set", "is_not_set":
		return out, nil
	}
	raw := bytes.TrimSpace(f.Value)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalid(field+".value", "operator %s needs a value", f.Op)
	}
	var items []json.RawMessage
	if f.Op == "in" || f.Op == "not_in" {
		if raw[0] == '[' {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, invalid(field+".value", "want a JSON array of values: %v", err)
			}
			if len(items) == 0 {
				return nil, invalid(field+".value", "operator %s needs at least one value", f.Op)
			}
		} else {
			items = []json.RawMessage{raw}
		}
	} else {
		items = []json.RawMessage{raw}
	}
	for i, it := range items {
		vf := field + ".value"
		if len(items) > 1 || raw[0] == '[' {
			vf = fieldIdx(vf, i)
		}
		v, err := jsonValue(it)
		if err != nil {
			return nil, invalid(vf, "%v", err)
		}
		if t == event.TypeString && (f.Op == "contains" || f.Op == "not_contains") && v.Type != event.TypeString {
			return nil, invalid(vf, "%s needs a string value", f.Op)
		}
		c, err := event.CoerceIn(v, t, p.loc)
		if err != nil {
			return nil, invalid(vf, "property %s is %s: %v", event.Quote(f.Property), t, err)
		}
		out.vals = append(out.vals, c)
		out.valFields = append(out.valFields, vf)
	}
	return out, nil
}

// jsonValue reads a JSON scalar as an event.Value: strings, booleans,
// integers (int) and other numbers (float).
func jsonValue(raw json.RawMessage) (event.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return event.Value{}, err
	}
	switch v := x.(type) {
	case string:
		return event.String(v), nil
	case bool:
		return event.Bool(v), nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return event.Int(i), nil
		}
		f, err := v.Float64()
		if err != nil || math.IsInf(f, 0) {
			return event.Value{}, fmt.Errorf("number %s is out of range", v)
		}
		return event.Float(f), nil
	}
	return event.Value{}, fmt.Errorf("want a string, number or boolean, found %s", raw)
}

// predKind is the evaluation form of a compiled predicate.
type predKind uint8

const (
	pkPresence   predKind = iota // is_set / is_not_set
	pkCodes                      // strings: a bitset over dictionary codes
	pkIntRange                   // ints: lo ≤ v ≤ hi
	pkIntSet                     // ints: v in a sorted list
	pkFloatRange                 // floats: lo ≤ v ≤ hi
	pkFloatSet                   // floats: v in a sorted list
	pkWidenRange                 // a float filter on an int column (a widened property): lo ≤ float64(v) ≤ hi
	pkWidenSet                   // likewise, v in a sorted list
)

// pred is a filter compiled against one dictionary (a segment's, for event
// filters; the query-wide one of a user property, for user filters) into
// the cheapest typed test (docs/analytics.md §3: string comparisons become dictionary
// code lookups). The result for a row with the property set is the kind's
// test, negated by neg; a row without it gets absent.
type pred struct {
	kind     predKind
	neg      bool
	absent   bool
	col      int      // event filters: index into Block.Props
	codes    []uint64 // pkCodes
	ilo, ihi int64
	flo, fhi float64
	ivals    []int64
	fvals    []float64
	none     bool // no row can pass: the filter never holds
	all      bool // every row passes: the filter always holds
}

// compilePred compiles f against dict (the sorted dictionary of a string
// property; ignored for other types).
func compilePred(f *filter, dict []string) pred {
	pr := pred{}
	switch f.op {
	case "neq", "not_in", "not_contains", "is_not_set":
		pr.absent = true
	}
	if f.op == "is_set" || f.op == "is_not_set" {
		pr.kind, pr.neg = pkPresence, f.op == "is_not_set"
		return pr
	}
	neg := f.op == "neq" || f.op == "not_in" || f.op == "not_contains"
	switch f.typ {
	case event.TypeString:
		pr.kind = pkCodes
		pr.codes = make([]uint64, (len(dict)+63)/64)
		n := 0
		for c, s := range dict {
			if stringTest(f, s) != neg {
				pr.codes[c>>6] |= 1 << (c & 63)
				n++
			}
		}
		pr.none = n == 0 && !pr.absent
		pr.all = n == len(dict) && pr.absent
	case event.TypeFloat:
		pr.neg = neg
		pr.kind = pkFloatRange
		v := f.vals[0].Float
		switch f.op {
		case "eq", "neq":
			pr.flo, pr.fhi = v, v
		case "gt":
			pr.flo, pr.fhi = math.Nextafter(v, math.Inf(1)), math.Inf(1)
		case "gte":
			pr.flo, pr.fhi = v, math.Inf(1)
		case "lt":
			pr.flo, pr.fhi = math.Inf(-1), math.Nextafter(v, math.Inf(-1))
		case "lte":
			pr.flo, pr.fhi = math.Inf(-1), v
		case "in", "not_in":
			pr.kind = pkFloatSet
			for _, x := range f.vals {
				pr.fvals = append(pr.fvals, x.Float)
			}
			slices.Sort(pr.fvals)
		}
	default: // int, bool, time
		pr.neg = neg
		pr.kind = pkIntRange
		v := f.vals[0].Int
		switch f.op {
		case "eq", "neq":
			pr.ilo, pr.ihi = v, v
		case "gt":
			pr.ilo, pr.ihi = v+1, math.MaxInt64
			if v == math.MaxInt64 {
				pr.ilo, pr.ihi = 1, 0 // empty
			}
		case "gte":
			pr.ilo, pr.ihi = v, math.MaxInt64
		case "lt":
			pr.ilo, pr.ihi = math.MinInt64, v-1
			if v == math.MinInt64 {
				pr.ilo, pr.ihi = 1, 0
			}
		case "lte":
			pr.ilo, pr.ihi = math.MinInt64, v
		case "in", "not_in":
			pr.kind = pkIntSet
			for _, x := range f.vals {
				pr.ivals = append(pr.ivals, x.Int)
			}
			slices.Sort(pr.ivals)
		}
		pr.none = !pr.neg && !pr.absent && pr.kind == pkIntRange && pr.ilo > pr.ihi
	}
	return pr
}

// widen makes a float predicate read an int column (a segment written
// before its property was widened to float, docs/analytics.md §1).
func (pr *pred) widen() {
	switch pr.kind {
	case pkFloatRange:
		pr.kind = pkWidenRange
	case pkFloatSet:
		pr.kind = pkWidenSet
	}
}

// stringTest is the positive test of a string filter on a set value.
func stringTest(f *filter, s string) bool {
	switch f.op {
	case "eq", "neq", "in", "not_in":
		for _, v := range f.vals {
			if v.Str == s {
				return true
			}
		}
		return false
	case "contains", "not_contains":
		return strings.Contains(s, f.vals[0].Str)
	}
	c := strings.Compare(s, f.vals[0].Str)
	switch f.op {
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	}
	return c <= 0 // lte
}

// test evaluates the predicate on row r of pd.
func (pr *pred) test(pd *segment.PropData, r int) bool {
	if pd.Present[r>>6]>>(r&63)&1 == 0 {
		return pr.absent
	}
	var ok bool
	switch pr.kind {
	case pkPresence:
		ok = true
	case pkCodes:
		c := pd.Strs[r]
		return pr.codes[c>>6]>>(c&63)&1 != 0
	case pkIntRange:
		v := pd.Ints[r]
		ok = v >= pr.ilo && v <= pr.ihi
	case pkIntSet:
		_, ok = slices.BinarySearch(pr.ivals, pd.Ints[r])
	case pkFloatRange:
		v := pd.Floats[r]
		ok = v >= pr.flo && v <= pr.fhi
	case pkFloatSet:
		_, ok = slices.BinarySearch(pr.fvals, pd.Floats[r])
	case pkWidenRange:
		v := float64(pd.Ints[r])
		ok = v >= pr.flo && v <= pr.fhi
	case pkWidenSet:
		_, ok = slices.BinarySearch(pr.fvals, float64(pd.Ints[r]))
	}
	return ok != pr.neg
}

// testValue evaluates the predicate on a user value (strings as ids into
// the dictionary the predicate was compiled against; floats as bits).
func (pr *pred) testValue(v trail.Value) bool {
	if !v.Set {
		return pr.absent
	}
	var ok bool
	switch pr.kind {
	case pkPresence:
		ok = true
	case pkCodes:
		return pr.codes[v.Bits>>6]>>(v.Bits&63)&1 != 0
	case pkIntRange:
		x := int64(v.Bits)
		ok = x >= pr.ilo && x <= pr.ihi
	case pkIntSet:
		_, ok = slices.BinarySearch(pr.ivals, int64(v.Bits))
	case pkFloatRange:
		x := math.Float64frombits(v.Bits)
		ok = x >= pr.flo && x <= pr.fhi
	case pkFloatSet:
		_, ok = slices.BinarySearch(pr.fvals, math.Float64frombits(v.Bits))
	}
	return ok != pr.neg
}

// renderValue renders a property value of type t for results: strings
// from dict, bools as true/false, times as RFC 3339 in loc, numbers in
// their shortest form; unset is "(none)".
func renderValue(v trail.Value, t event.Type, dict []string, loc *time.Location) string {
	if !v.Set {
		return noneLabel
	}
	switch t {
	case event.TypeString:
		return dict[v.Bits]
	case event.TypeFloat:
		return event.Float(math.Float64frombits(v.Bits)).String()
	case event.TypeBool:
		return event.Bool(v.Bits != 0).String()
	case event.TypeTime:
		return formatTime(int64(v.Bits), loc)
	}
	return event.Int(int64(v.Bits)).String()
}

// Breakdown labels of docs/analytics.md §4.
const (
	noneLabel  = "(none)"
	otherLabel = "(other)"
)
