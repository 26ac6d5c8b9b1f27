package query

import (
	"errors"
	"testing"

	"github.com/spurdb/spur/event"
)

// TestCompileDeleteWhere: a deletion's filters are typed against the
// app's event properties; a user filter, an unknown property and a
// value of the wrong type are invalid_query naming the field.
func TestCompileDeleteWhere(t *testing.T) {
	props := []event.PropType{{Name: "n", Type: event.TypeInt}, {Name: "s", Type: event.TypeString}}
	if _, err := CompileDeleteWhere(`[{"property":"n","op":"gt","value":1},{"property":"s","op":"in","value":["a","b"]}]`, props); err != nil {
		t.Fatal(err)
	}
	for where, field := range map[string]string{
		`[{"property":"s","op":"eq","value":"a","source":"user"}]`: "where[0].source",
		`[{"property":"x","op":"eq","value":1}]`:                   "where[0].property",
		`[{"property":"n","op":"eq","value":"a"}]`:                 "where[0].value",
		`{"property":"n"}`: "where",
	} {
		_, err := CompileDeleteWhere(where, props)
		var qe *Error
		if !errors.As(err, &qe) || qe.Code != CodeInvalidQuery || qe.Field != field {
			t.Errorf("%s: %v, want invalid_query at %s", where, err, field)
		}
	}
}
