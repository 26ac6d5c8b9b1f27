package event

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxPropNameBytes is the longest accepted property name in bytes.
const MaxPropNameBytes = 256

// ValidatePropName checks a property name: non-empty, valid UTF-8, at
// most MaxPropNameBytes bytes (docs/analytics.md §1: names beginning with "$", as
// PostHog's "$browser" or "$current_url", are ordinary names). The error
// names the property (quoted briefly, Quote) and the rule broken.
func ValidatePropName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty property name")
	case len(name) > MaxPropNameBytes:
		return fmt.Errorf("property name %s is %d bytes long (at most %d)", Quote(name), len(name), MaxPropNameBytes)
	case !utf8.ValidString(name):
		return fmt.Errorf("property name %s is not valid UTF-8", Quote(name))
	}
	return nil
}

// PropType is one property of a Schema and its type.
type PropType struct {
	Name string `json:"name"`
	Type Type   `json:"type"`
}

// Schema holds the property types of one app (docs/analytics.md §1): a property's type is
// fixed by its first sighting or by Declare, and later values are coerced to
// it losslessly (CoerceIn) or rejected — except that an int property that
// receives a non-integer number becomes float (the automatic widening of
// docs/analytics.md §1; the app's stored ints then read as floats, exactly up to 2^53).
//
// A Schema is not safe for concurrent use; take a Clone to hand a snapshot
// to readers. The zero Schema is not usable; call NewSchema.
type Schema struct {
	index map[string]int32 // name → position in props
	props []PropType       // in order of first sighting
	// slots caches, per position in an Event's Props, the props index of the
	// name seen there last, so CoerceEvent on rows with a stable column
	// order does no map lookup. -1 = unknown.
	slots []int32
	// widened counts int → float widenings (Widenings).
	widened int
	widen   []int32 // CoerceEvent's scratch: properties the event widens
}

// widens reports whether a value that CoerceIn could not make type t
// widens the property instead: an int property receiving a float (a
// non-integer number, or one beyond int64).
func widens(t Type, v Value) bool { return t == TypeInt && v.Type == TypeFloat }

// Widenings returns the number of int → float widenings so far, so that
// a holder of values typed by the schema can tell when to convert them.
func (s *Schema) Widenings() int { return s.widened }

// WidenToFloat makes the int property name float (docs/analytics.md §1's automatic
// widening) and reports whether it was int.
func (s *Schema) WidenToFloat(name string) bool {
	i, ok := s.index[name]
	if !ok || s.props[i].Type != TypeInt {
		return false
	}
	s.props[i].Type = TypeFloat
	s.widened++
	return true
}

// NewSchema returns an empty schema.
func NewSchema() *Schema {
	return &Schema{index: make(map[string]int32)}
}

// Len returns the number of properties.
func (s *Schema) Len() int { return len(s.props) }

// Type returns the type of property name and whether it is known.
func (s *Schema) Type(name string) (Type, bool) {
	if i, ok := s.index[name]; ok {
		return s.props[i].Type, true
	}
	return TypeNone, false
}

// Declare fixes the type of property name. Declaring a known property with
// its current type is a no-op. It returns an error for an invalid name
// (ValidatePropName), an invalid type (TypeNone or unknown), or a property
// already known with another type.
func (s *Schema) Declare(name string, t Type) error {
	if t == TypeNone || t > TypeTime {
		return fmt.Errorf("property %s: cannot declare type %s", Quote(name), t)
	}
	if i, ok := s.index[name]; ok {
		if have := s.props[i].Type; have != t {
			return fmt.Errorf("property %s: already has type %s, cannot declare %s", Quote(name), have, t)
		}
		return nil
	}
	if err := ValidatePropName(name); err != nil {
		return err
	}
	s.add(name, t)
	return nil
}

func (s *Schema) add(name string, t Type) int32 {
	name = strings.Clone(name) // may be borrowed from a reader's buffer
	i := int32(len(s.props))
	s.props = append(s.props, PropType{Name: name, Type: t})
	s.index[name] = i
	return i
}

// Coerce returns v coerced to the type of property name (CoerceIn, UTC).
// The first not-null value of an unknown property fixes its type; its name
// must pass ValidatePropName. A float that an int property cannot take
// widens the property to float and is returned as is. A not-set value
// (TypeNone) is returned as is and fixes nothing. The error names the
// property, the expected and the found type: `property "price": expected
// float, found string "abc"`.
func (s *Schema) Coerce(name string, v Value) (Value, error) {
	if v.Type == TypeNone {
		return v, nil
	}
	i, ok := s.index[name]
	if !ok {
		if err := ValidatePropName(name); err != nil {
			return Value{}, err
		}
		s.add(name, v.Type)
		return v, nil
	}
	out, err := CoerceIn(v, s.props[i].Type, nil)
	if err != nil {
		if widens(s.props[i].Type, v) {
			s.props[i].Type = TypeFloat
			s.widened++
			return v, nil
		}
		return Value{}, fmt.Errorf("property %s: %w", Quote(name), err)
	}
	return out, nil
}

// CoerceEvent coerces every property of ev in place (CoerceIn, UTC) and
// records the types of properties seen for the first time and the int
// properties a float widens (see Coerce), but only when the whole event is
// accepted: a rejected event changes nothing in the schema. Not-set values
// are left as they are.
//
// It returns a *RowError at ev.Pos whose Field is the first offending
// property and whose Msg says what was expected and found (or which naming
// rule was broken). A property name repeated within ev is accepted only
// with values of one type.
//
// For rows whose properties come in the same order as the previous call's,
// it does no map lookup: the slot of each position is cached.
func (s *Schema) CoerceEvent(ev *Event) error {
	for len(s.slots) < len(ev.Props) {
		s.slots = append(s.slots, -1)
	}
	fresh := false // some property is not in the schema yet
	s.widen = s.widen[:0]
	for i := range ev.Props {
		p := &ev.Props[i]
		if p.Value.Type == TypeNone {
			continue
		}
		slot := s.slots[i]
		if slot < 0 || s.props[slot].Name != p.Name {
			var ok bool
			if slot, ok = s.index[p.Name]; !ok {
				if err := ValidatePropName(p.Name); err != nil {
					return &RowError{Pos: ev.Pos, Field: p.Name, Msg: err.Error()}
				}
				fresh = true
				continue
			}
			s.slots[i] = slot
		}
		v, err := CoerceIn(p.Value, s.props[slot].Type, nil)
		if err != nil {
			if widens(s.props[slot].Type, p.Value) {
				s.widen = append(s.widen, slot)
				continue
			}
			return &RowError{Pos: ev.Pos, Field: p.Name, Msg: err.Error()}
		}
		p.Value = v
	}
	if !fresh {
		s.applyWiden(ev)
		return nil
	}
	// Second pass: the event is valid against the known properties; check
	// repeated new names against each other, then record them.
	for i := range ev.Props {
		p := &ev.Props[i]
		if p.Value.Type == TypeNone {
			continue
		}
		if _, ok := s.index[p.Name]; ok {
			continue
		}
		for j := i + 1; j < len(ev.Props); j++ {
			q := &ev.Props[j]
			if q.Name == p.Name && q.Value.Type != TypeNone && q.Value.Type != p.Value.Type {
				return &RowError{Pos: ev.Pos, Field: p.Name, Msg: mismatch(p.Value.Type, q.Value).Error()}
			}
		}
	}
	for i := range ev.Props {
		p := &ev.Props[i]
		if p.Value.Type == TypeNone {
			continue
		}
		slot, ok := s.index[p.Name]
		if !ok {
			slot = s.add(p.Name, p.Value.Type)
		}
		s.slots[i] = slot
	}
	s.applyWiden(ev)
	return nil
}

// applyWiden widens the properties CoerceEvent found widened by an
// accepted event, and makes the event's int values of them floats.
func (s *Schema) applyWiden(ev *Event) {
	if len(s.widen) == 0 {
		return
	}
	for _, slot := range s.widen {
		if s.props[slot].Type == TypeInt {
			s.props[slot].Type = TypeFloat
			s.widened++
		}
	}
	for i := range ev.Props {
		p := &ev.Props[i]
		if slot, ok := s.index[p.Name]; ok && p.Value.Type == TypeInt && s.props[slot].Type == TypeFloat {
			p.Value = Float(float64(p.Value.Int))
		}
	}
}

// Clone returns an independent copy of s.
func (s *Schema) Clone() *Schema {
	c := &Schema{index: make(map[string]int32, len(s.props)), props: slices.Clone(s.props)}
	for i, p := range c.props {
		c.index[p.Name] = int32(i)
	}
	return c
}

// Props returns the properties sorted by name, in a newly allocated slice.
func (s *Schema) Props() []PropType {
	out := slices.Clone(s.props)
	slices.SortFunc(out, func(a, b PropType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MarshalJSON encodes the schema as a JSON object mapping each property name
// to its type name, keys sorted: {"price":"float","brand":"string"}.
func (s *Schema) MarshalJSON() ([]byte, error) {
	m := make(map[string]Type, len(s.props))
	for _, p := range s.props {
		m[p.Name] = p.Type
	}
	return json.Marshal(m)
}

// UnmarshalJSON replaces the content of s with the object written by
// MarshalJSON. It rejects unknown type names and invalid property names.
func (s *Schema) UnmarshalJSON(b []byte) error {
	var m map[string]Type
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("decode schema: %w", err)
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	*s = Schema{index: make(map[string]int32, len(m))}
	for _, n := range names {
		if err := s.Declare(n, m[n]); err != nil {
			return fmt.Errorf("decode schema: %w", err)
		}
	}
	return nil
}

// MarshalText returns the type's name (String); TypeNone and unknown types
// are an error, so a schema never records "none".
func (t Type) MarshalText() ([]byte, error) {
	if t == TypeNone || t > TypeTime {
		return nil, fmt.Errorf("cannot encode property type %s", t)
	}
	return []byte(t.String()), nil
}

// UnmarshalText parses a type name with ParseType.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
