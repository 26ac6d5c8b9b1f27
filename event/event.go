// Package event defines Spur's data model shared by every layer: events,
// typed property values, per-app property schemas and the parsing of input
// timestamps (docs/analytics.md §1).
//
// Timestamps are always int64 UTC microseconds since the Unix epoch.
// Values of TypeTime are stored the same way.
package event

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Type is the type of a property. A property's type is fixed per app by its
// first sighting or by a declared schema (docs/analytics.md §1).
type Type uint8

// Property types. TypeNone is the zero value and means "not set".
const (
	TypeNone   Type = iota // not set (missing or JSON null)
	TypeString             // UTF-8 string
	TypeInt                // int64
	TypeFloat              // float64
	TypeBool               // bool
	TypeTime               // instant, int64 UTC microseconds
)

var typeNames = [...]string{"none", "string", "int", "float", "bool", "time"}

// String returns the lower-case name used in schemas and error messages
// ("string", "int", "float", "bool", "time"; "none" for TypeNone).
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// ParseType parses a type name as written by String. It returns an error
// naming the accepted names for anything else, including "none".
func ParseType(s string) (Type, error) {
	for i, n := range typeNames {
		if i > 0 && n == s {
			return Type(i), nil
		}
	}
	return TypeNone, fmt.Errorf("unknown property type %q (want string, int, float, bool or time)", s)
}

// Value is one typed property value. It is used on the ingest path and for
// query constants, never in a per-event query loop.
//
// Int holds int values, bool values (0 or 1) and time values (UTC
// microseconds); Float holds float values; Str holds string values. The zero
// Value has Type TypeNone and means "not set".
type Value struct {
	Type  Type
	Int   int64
	Float float64
	Str   string
}

// String returns a human-readable rendering of v for messages and tables:
// times as RFC 3339 in UTC with microseconds, bools as true/false.
func (v Value) String() string {
	switch v.Type {
	case TypeString:
		return v.Str
	case TypeInt:
		return strconv.FormatInt(v.Int, 10)
	case TypeFloat:
		return strconv.FormatFloat(v.Float, 'g', -1, 64)
	case TypeBool:
		return strconv.FormatBool(v.Int != 0)
	case TypeTime:
		return time.UnixMicro(v.Int).UTC().Format("2006-01-02T15:04:05.999999Z07:00")
	}
	return "(none)"
}

// String, Int, Float, Bool and Time construct typed Values.
func String(s string) Value { return Value{Type: TypeString, Str: s} }

// Int returns an int Value.
func Int(i int64) Value { return Value{Type: TypeInt, Int: i} }

// Float returns a float Value.
func Float(f float64) Value { return Value{Type: TypeFloat, Float: f} }

// Bool returns a bool Value.
func Bool(b bool) Value {
	if b {
		return Value{Type: TypeBool, Int: 1}
	}
	return Value{Type: TypeBool}
}

// Time returns a time Value from UTC microseconds.
func Time(us int64) Value { return Value{Type: TypeTime, Int: us} }

// Prop is one named property value of an event or a user.
type Prop struct {
	Name  string
	Value Value
}

// Pos is an input position for error messages: a file name (or "-" for
// standard input, or a request name) and a 1-based line number (for Parquet,
// the 1-based row number). Line 0 means "unknown".
type Pos struct {
	File string
	Line int64
}

// String renders "file:line" (or just the file when Line is 0).
func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return p.File + ":" + strconv.FormatInt(p.Line, 10)
}

// Event is one input event (docs/analytics.md §1). Readers reuse one Event across calls,
// so the Props slice and strings are only valid until the next read unless
// the reader documents otherwise.
//
// Time is UTC microseconds since the Unix epoch. InsertID is empty when not
// given. For a users file (user properties), Name is empty and Time is the
// time of the property write.
type Event struct {
	UserID   string
	Time     int64
	Name     string
	InsertID string
	Props    []Prop
	Pos      Pos
}

// Limits from docs/analytics.md §1.
const (
	MaxUserIDBytes    = 256 // user_id at most 256 bytes
	MaxEventNameBytes = 256 // event name at most 256 bytes
)

// DefaultMaxPropertyBytes is the default limit on the size of one string
// property value (and of an insert id), in bytes: 64 KiB. docs/analytics.md §1 sets
// none; ingest.Options.MaxPropertyBytes (`--max-property-bytes` of `spur
// import` and `spur serve`) configures it. A longer value is a row error,
// so that one stray field cannot put megabytes into every dictionary,
// schema summary and breakdown that reads it.
const DefaultMaxPropertyBytes = 64 << 10

// CheckValueBytes returns an error when v is a string of more than max
// bytes (max ≤ 0: no limit): "value is N bytes long, over the limit of M
// bytes". Other types always pass. It does not allocate when v passes.
func CheckValueBytes(v Value, max int) error {
	if v.Type != TypeString || max <= 0 || len(v.Str) <= max {
		return nil
	}
	return errors.New("value is " + strconv.Itoa(len(v.Str)) + " bytes long, over the limit of " + strconv.Itoa(max) + " bytes per value")
}

// RowError is a rejected input row: where it is, which field, and why.
// It is returned by readers for a bad row (the reader stays usable and the
// next call reads the next row) and by the import for a value that does not
// fit the app's schema.
type RowError struct {
	Pos   Pos
	Field string // column or property name; empty when the whole row is bad
	Msg   string // what was expected and what was found
}

// Error renders "file:line: field "x": message".
func (e *RowError) Error() string {
	if e.Field == "" {
		return e.Pos.String() + ": " + e.Msg
	}
	return e.Pos.String() + ": field " + strconv.Quote(e.Field) + ": " + e.Msg
}
