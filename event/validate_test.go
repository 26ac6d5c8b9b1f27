package event

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateEvent(t *testing.T) {
	ok := Event{UserID: "u1", Name: "view", Props: []Prop{{"a", Int(1)}, {"b", Int(2)}}}
	if err := ValidateEvent(&ok); err != nil {
		t.Fatalf("valid event: %v", err)
	}
	long := strings.Repeat("x", 257)
	tests := []struct {
		mod   func(*Event)
		field string
		msg   string
	}{
		{func(e *Event) { e.UserID = "" }, FieldUserID, "empty user id"},
		{func(e *Event) { e.UserID = long }, FieldUserID, "257 bytes long (at most 256)"},
		{func(e *Event) { e.UserID = "a\xffb" }, FieldUserID, "not valid UTF-8"},
		{func(e *Event) { e.Name = "" }, FieldEvent, "empty event name"},
		{func(e *Event) { e.Name = long }, FieldEvent, "257 bytes long"},
		{func(e *Event) { e.Name = "\xc3" }, FieldEvent, "not valid UTF-8"},
		{func(e *Event) { e.Props = []Prop{{"a", Int(1)}, {"a", Int(2)}} }, "a", "property given twice"},
		{func(e *Event) { e.Props = []Prop{{"", Int(1)}} }, "", "empty property name"},
	}
	for i, tc := range tests {
		ev := ok
		ev.Pos = Pos{File: "x.ndjson", Line: int64(i + 1)}
		tc.mod(&ev)
		err := ValidateEvent(&ev)
		var re *RowError
		if !errors.As(err, &re) {
			t.Errorf("case %d: error %v, want *RowError", i, err)
			continue
		}
		if re.Field != tc.field || !strings.Contains(re.Msg, tc.msg) || re.Pos != ev.Pos {
			t.Errorf("case %d: %+v, want field %q and %q", i, re, tc.field, tc.msg)
		}
	}
	ev := ok
	ev.UserID = strings.Repeat("é", 128) // 256 bytes
	ev.Name = strings.Repeat("n", 256)
	if err := ValidateEvent(&ev); err != nil {
		t.Errorf("limits are inclusive: %v", err)
	}
}

func TestValidateUser(t *testing.T) {
	u := Event{UserID: "u1", Props: []Prop{{"plan", String("pro")}}}
	if err := ValidateUser(&u); err != nil {
		t.Fatal(err)
	}
	u.Name = "x"
	if err := ValidateUser(&u); err == nil {
		t.Errorf("user row with event name accepted")
	}
	u.Name, u.UserID = "", ""
	if err := ValidateUser(&u); err == nil {
		t.Errorf("empty user id accepted")
	}
}

func TestValidateEventAllocs(t *testing.T) {
	ev := Event{UserID: "u1", Name: "view", Props: []Prop{{"a", Int(1)}, {"b", Int(2)}, {"c", Int(2)}}}
	if n := testing.AllocsPerRun(100, func() {
		if err := ValidateEvent(&ev); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocs", n)
	}
}
