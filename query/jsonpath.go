package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/spurdb/spur/event"
)

// DecodeJSON decodes one JSON value from data into v (a pointer) strictly:
// unknown fields are rejected (a typo must not silently change a request)
// and nothing may follow the value. The error is an *Error with code
// invalid_query whose Field is the JSON path of the offending value
// ("series[0].evnt", "steps[1].where[0].value") and whose Message says
// what was wrong, quoting input briefly (event.Quote). Server endpoints
// that take JSON bodies use it so that every message keeps its path.
//
// encoding/json reports an unknown field without its path and a type
// error with a path without array indexes; on such an error DecodeJSON
// walks the input once more alongside v's type to find the first offending
// value in document order (the one encoding/json reports). The happy path
// costs one json.Decoder.Decode.
func DecodeJSON(data []byte, v any) *Error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(data, reflect.TypeOf(v), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Code: CodeInvalidQuery, Message: fmt.Sprintf("trailing data after the JSON value at byte %d", dec.InputOffset())}
	}
	return nil
}

func jsonError(data []byte, t reflect.Type, err error) *Error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &Error{Code: CodeInvalidQuery, Err: err, Message: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Code: CodeInvalidQuery, Err: err, Message: "malformed JSON: the input ends before the value does"}
	case errors.As(err, &te), strings.HasPrefix(err.Error(), "json: unknown field "):
		if p, ok := findProblem(data, t); ok {
			return &Error{Code: CodeInvalidQuery, Err: err, Field: p.path, Message: p.message}
		}
		if te != nil {
			return &Error{Code: CodeInvalidQuery, Err: err, Field: te.Field, Message: fmt.Sprintf("want a JSON %s, found %s", te.Type, te.Value)}
		}
	}
	return &Error{Code: CodeInvalidQuery, Err: err, Message: "malformed JSON: " + err.Error()}
}

// jsonProblem is the first value of a JSON document that does not fit the
// Go type it is decoded into.
type jsonProblem struct {
	path    string
	message string
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
)

// findProblem walks data alongside t and returns the first unknown field
// or value of the wrong JSON kind, in document order.
func findProblem(data []byte, t reflect.Type) (jsonProblem, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := pathWalker{dec: dec}
	p, found, err := w.walk(t, "")
	return p, found && err == nil
}

type pathWalker struct{ dec *json.Decoder }

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// walk reads one value of type t at path. It returns the first problem
// found in it, or found false; err is a syntax error (which Decode would
// have reported first, so the caller gives up).
func (w *pathWalker) walk(t reflect.Type, path string) (p jsonProblem, found bool, err error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType) {
		var raw json.RawMessage
		return p, false, w.dec.Decode(&raw) // decoded by its own rules
	}
	tok, err := w.dec.Token()
	if err != nil {
		return p, false, err
	}
	mismatch := func(found string) (jsonProblem, bool, error) {
		return jsonProblem{path: path, message: fmt.Sprintf("want %s, found %s", jsonKind(t), found)}, true, nil
	}
	switch v := tok.(type) {
	case nil:
		return p, false, nil // null fits everything
	case bool:
		if t.Kind() != reflect.Bool {
			return mismatch("a boolean")
		}
	case string:
		if t.Kind() != reflect.String {
			return mismatch("a string " + event.Quote(v))
		}
	case json.Number:
		ok := false
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			_, e := strconv.ParseInt(string(v), 10, t.Bits())
			ok = e == nil
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			_, e := strconv.ParseUint(string(v), 10, t.Bits())
			ok = e == nil
		case reflect.Float32, reflect.Float64:
			_, e := strconv.ParseFloat(string(v), t.Bits())
			ok = e == nil
		}
		if !ok {
			num := string(v)
			if len(num) > event.QuoteMaxBytes {
				num = event.Quote(num)
			}
			return mismatch("the number " + num)
		}
	case json.Delim:
		switch {
		case v == '{' && t.Kind() == reflect.Struct:
			return w.object(t, path)
		case v == '{' && t.Kind() == reflect.Map:
			for w.dec.More() {
				key, err := w.dec.Token()
				if err != nil {
					return p, false, err
				}
				ks, _ := key.(string)
				if p, found, err := w.walk(t.Elem(), joinPath(path, ks)); found || err != nil {
					return p, found, err
				}
			}
			_, err = w.dec.Token()
			return p, false, err
		case v == '[' && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array):
			for i := 0; w.dec.More(); i++ {
				if p, found, err := w.walk(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); found || err != nil {
					return p, found, err
				}
			}
			_, err = w.dec.Token()
			return p, false, err
		case v == '{':
			return mismatch("an object")
		default:
			return mismatch("an array")
		}
	}
	return p, false, nil
}

// object reads the members of an object decoded into struct type t.
func (w *pathWalker) object(t reflect.Type, path string) (p jsonProblem, found bool, err error) {
	fields := jsonFields(t, nil)
	for w.dec.More() {
		tok, err := w.dec.Token()
		if err != nil {
			return p, false, err
		}
		key, _ := tok.(string)
		ft, ok := lookupField(fields, key)
		if !ok {
			names := make([]string, len(fields))
			for i, f := range fields {
				names[i] = f.name
			}
			return jsonProblem{path: joinPath(path, key),
				message: fmt.Sprintf("unknown field %s (known: %s)", event.Quote(key), strings.Join(names, ", "))}, true, nil
		}
		if p, found, err := w.walk(ft, joinPath(path, key)); found || err != nil {
			return p, found, err
		}
	}
	_, err = w.dec.Token()
	return p, false, err
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// jsonFields lists the JSON members of struct type t as encoding/json sees
// them: tagged or exported names, embedded structs flattened, "-" left out.
func jsonFields(t reflect.Type, out []jsonField) []jsonField {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && !strings.HasPrefix(tag, "-,") {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = jsonFields(ft, out)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name: name, typ: f.Type})
	}
	return out
}

// lookupField finds key as encoding/json does: an exact name first, then
// a case-insensitive match.
func lookupField(fields []jsonField, key string) (reflect.Type, bool) {
	for _, f := range fields {
		if f.name == key {
			return f.typ, true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f.name, key) {
			return f.typ, true
		}
	}
	return nil, false
}

// jsonKind names the JSON kind a Go type takes, for messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return "a " + t.Kind().String()
}
