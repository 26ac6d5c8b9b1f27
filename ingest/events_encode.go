package ingest

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
)

// AppendEventJSON appends ev as one JSON object of the events endpoint's
// shape (docs/ingest.md §1, what EventsParser reads) to dst and returns the
// extended slice, without a newline:
//
//	{"user_id":…,"event":…,"timestamp":"2026-11-24T09:30:00.123456Z","insert_id":…,"properties":{…},"user_properties":{…},"user_properties_once":{…}}
//
// The timestamp is RFC 3339 in UTC with microseconds; insert_id and the
// property objects are left out when empty (user and once are
// user_properties and user_properties_once). Property values: strings
// (invalid UTF-8 replaced by U+FFFD), ints, floats written so that they
// read back as floats ("2.0", not "2"; non-finite ones as null, which JSON
// cannot hold), bools, and times as RFC 3339 strings. It allocates only
// when dst must grow.
func AppendEventJSON(dst []byte, ev *event.Event, user, once []event.Prop) []byte {
	dst = append(dst, `{"user_id":`...)
	dst = appendJSONString(dst, ev.UserID)
	dst = append(dst, `,"event":`...)
	dst = appendJSONString(dst, ev.Name)
	dst = append(dst, `,"timestamp":"`...)
	dst = appendRFC3339(dst, ev.Time)
	dst = append(dst, '"')
	if ev.InsertID != "" {
		dst = append(dst, `,"insert_id":`...)
		dst = appendJSONString(dst, ev.InsertID)
	}
	for _, o := range [...]struct {
		key   string
		props []event.Prop
	}{{`,"properties":{`, ev.Props}, {`,"user_properties":{`, user}, {`,"user_properties_once":{`, once}} {
		if len(o.props) == 0 {
			continue
		}
		dst = appendJSONProps(append(dst, o.key...), o.props)
	}
	return append(dst, '}')
}

// AppendUserJSON appends one users-file row of `spur import --users`'s
// NDJSON shape to dst and returns the extended slice, without a newline:
//
//	{"user_id":…,"properties":{…}}
//
// (no timestamp: the import writes the properties at its own time),
// values written as AppendEventJSON writes them, properties left out when
// empty. It allocates only when dst must grow.
func AppendUserJSON(dst []byte, userID string, props []event.Prop) []byte {
	dst = append(dst, `{"user_id":`...)
	dst = appendJSONString(dst, userID)
	if len(props) > 0 {
		dst = appendJSONProps(append(dst, `,"properties":{`...), props)
	}
	return append(dst, '}')
}

// appendJSONProps appends the members of a properties object and its
// closing brace.
func appendJSONProps(dst []byte, props []event.Prop) []byte {
	for i, p := range props {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, p.Name)
		dst = append(dst, ':')
		dst = appendJSONValue(dst, p.Value)
	}
	return append(dst, '}')
}

// appendRFC3339 appends UTC microseconds us as RFC 3339 with six
// fractional digits and "Z".
func appendRFC3339(dst []byte, us int64) []byte {
	t := time.UnixMicro(us).UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(dst, "2006-01-02T15:04:05.000000Z07:00")
	}
	// What AppendFormat writes with that layout, without parsing the
	// layout per call (a third of an NDJSON export's time).
	h, mi, sec := t.Clock()
	dst = appendDigits(dst, y, 4)
	dst = appendDigits(append(dst, '-'), int(mo), 2)
	dst = appendDigits(append(dst, '-'), d, 2)
	dst = appendDigits(append(dst, 'T'), h, 2)
	dst = appendDigits(append(dst, ':'), mi, 2)
	dst = appendDigits(append(dst, ':'), sec, 2)
	dst = appendDigits(append(dst, '.'), t.Nanosecond()/1000, 6)
	return append(dst, 'Z')
}

// appendDigits appends v (≥ 0, below 10^width) as width decimal digits.
func appendDigits(dst []byte, v, width int) []byte {
	n := len(dst)
	for range width {
		dst = append(dst, '0')
	}
	for i := len(dst) - 1; i >= n; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
	return dst
}

// appendJSONValue appends v as a JSON value (see AppendEventJSON).
func appendJSONValue(dst []byte, v event.Value) []byte {
	switch v.Type {
	case event.TypeString:
		return appendJSONString(dst, v.Str)
	case event.TypeInt:
		return strconv.AppendInt(dst, v.Int, 10)
	case event.TypeFloat:
		if math.IsInf(v.Float, 0) || math.IsNaN(v.Float) {
			return append(dst, "null"...)
		}
		n := len(dst)
		dst = strconv.AppendFloat(dst, v.Float, 'g', -1, 64)
		for _, c := range dst[n:] {
			if c == '.' || c == 'e' {
				return dst
			}
		}
		return append(dst, ".0"...)
	case event.TypeBool:
		return strconv.AppendBool(dst, v.Int != 0)
	case event.TypeTime:
		dst = append(dst, '"')
		return append(appendRFC3339(dst, v.Int), '"')
	}
	return append(dst, "null"...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string: quotes, backslashes and
// control characters escaped, invalid UTF-8 as U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendJSONObject appends props as one JSON object ({} when empty),
// values written as AppendEventJSON writes them (the SDK load generator
// builds other protocols' bodies with it). It allocates only when dst
// must grow.
func AppendJSONObject(dst []byte, props []event.Prop) []byte {
	return appendJSONProps(append(dst, '{'), props)
}

// AppendJSONString appends s as a JSON string (invalid UTF-8 replaced by
// U+FFFD).
func AppendJSONString(dst []byte, s string) []byte { return appendJSONString(dst, s) }

// AppendRFC3339 appends UTC microseconds us as RFC 3339 with six
// fractional digits and "Z" (2026-11-24T09:30:00.123456Z).
func AppendRFC3339(dst []byte, us int64) []byte { return appendRFC3339(dst, us) }
