package event

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// maxExactInt is 2^53, the largest magnitude below which every integer is
// exactly representable as a float64.
const maxExactInt = 1 << 53

// Coerce converts v to type to where the conversion is lossless (docs/analytics.md §1),
// reading timestamp strings without an offset as UTC. It is CoerceIn with a
// nil location.
func Coerce(v Value, to Type) (Value, error) {
	return CoerceIn(v, to, nil)
}

// CoerceIn converts v to type to where the conversion is lossless (docs/analytics.md §1).
// A value that already has type to, and a not-set value (TypeNone), are
// returned unchanged. The accepted conversions are:
//
//   - string → int: a base-10 integer as accepted by strconv.ParseInt ("42", "-7");
//   - string → float: a finite decimal number ("4.5", "1e3"; no hex, NaN or Inf);
//   - string → bool: "true", "false", "TRUE", "FALSE", "True" or "False";
//   - string → time: any form accepted by ParseTime, wall clock times in loc
//     (nil means UTC);
//   - int → float: only when |i| ≤ 2^53, so the float holds the same number;
//   - float → int: only for an integral value in the int64 range (3.0 → 3):
//     the number is unchanged, only its representation;
//   - int → time and float → time: a Unix epoch number by the magnitude rule
//     of EpochToMicros (docs/analytics.md §1 lists epoch numbers as timestamps), within
//     [MinTime, MaxTime];
//   - int, float, bool and time → string: the rendering of Value.String
//     (decimal, shortest round-trip float, "true"/"false", RFC 3339 UTC with
//     microseconds), which parses back to the same value.
//
// Everything else (bool ↔ number, time → number, "4.0" → int, …) is an error
// of the form `expected int, found string "abc"`; strings in messages are
// truncated to 64 bytes. The returned Value's Str may share memory with v.Str.
func CoerceIn(v Value, to Type, loc *time.Location) (Value, error) {
	if v.Type == to || v.Type == TypeNone {
		return v, nil
	}
	switch to {
	case TypeString:
		if v.Type >= TypeInt && v.Type <= TypeTime {
			return String(v.String()), nil
		}
	case TypeInt:
		switch v.Type {
		case TypeString:
			if i, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
				return Int(i), nil
			}
		case TypeFloat:
			// -2^63 is exactly representable; 2^63 is out of range.
			if f := v.Float; f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
				return Int(int64(f)), nil
			}
		}
	case TypeFloat:
		switch v.Type {
		case TypeString:
			if f, ok := parseDecimalFloat(v.Str); ok {
				return Float(f), nil
			}
		case TypeInt:
			if v.Int >= -maxExactInt && v.Int <= maxExactInt {
				return Float(float64(v.Int)), nil
			}
		}
	case TypeBool:
		if v.Type == TypeString {
			switch v.Str {
			case "true", "TRUE", "True":
				return Bool(true), nil
			case "false", "FALSE", "False":
				return Bool(false), nil
			}
		}
	case TypeTime:
		switch v.Type {
		case TypeString:
			if us, reason := parseTime(v.Str, loc); reason == "" {
				return Time(us), nil
			}
		case TypeInt:
			if us, err := EpochToMicros(v.Int); err == nil {
				return Time(us), nil
			}
		case TypeFloat:
			if us, err := EpochFloatToMicros(v.Float); err == nil {
				return Time(us), nil
			}
		}
	}
	return Value{}, mismatch(to, v)
}

// parseDecimalFloat parses a finite decimal float; it rejects the hex,
// underscore, NaN and Inf spellings that strconv.ParseFloat also accepts.
func parseDecimalFloat(s string) (float64, bool) {
	if strings.ContainsAny(s, "xXnN_") { // hex, NaN, Inf/Infinity, underscores
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// mismatch returns the error `expected T, found U value`.
func mismatch(want Type, v Value) error {
	return fmt.Errorf("expected %s, found %s", want, describe(v))
}

// describe renders a value with its type for messages: `string "abc"`,
// `int 42`.
func describe(v Value) string {
	if v.Type == TypeString {
		return "string " + Quote(v.Str)
	}
	return v.Type.String() + " " + v.String()
}
