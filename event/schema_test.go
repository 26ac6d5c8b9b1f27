package event

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSchemaFirstSighting(t *testing.T) {
	s := NewSchema()
	v, err := s.Coerce("price", Int(3))
	if err != nil || v != Int(3) {
		t.Fatalf("first sighting: %v, %v", v, err)
	}
	if typ, ok := s.Type("price"); !ok || typ != TypeInt {
		t.Fatalf("Type(price) = %s, %v", typ, ok)
	}
	if v, err = s.Coerce("price", String("42")); err != nil || v != Int(42) {
		t.Errorf(`"42" into int: %v, %v`, v, err)
	}
	if v, err = s.Coerce("price", Float(7)); err != nil || v != Int(7) {
		t.Errorf("7.0 into int: %v, %v", v, err)
	}
	_, err = s.Coerce("price", String("3.5"))
	if err == nil || err.Error() != `property "price": expected int, found string "3.5"` {
		t.Errorf(`"3.5" into int: error %v`, err)
	}
	if v, err = s.Coerce("price", Value{}); err != nil || v.Type != TypeNone {
		t.Errorf("not set: %v, %v", v, err)
	}
	if _, err = s.Coerce("unset", Value{}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Type("unset"); ok {
		t.Errorf("a not-set value fixed a type")
	}
	if _, err = s.Coerce("$browser", String("x")); err != nil {
		t.Errorf("$browser: %v (names beginning with $ are ordinary, docs/analytics.md §1)", err)
	}
	if _, err = s.Coerce("", String("x")); err == nil {
		t.Errorf("empty name accepted")
	}
}

func TestSchemaDeclare(t *testing.T) {
	s := NewSchema()
	if err := s.Declare("when", TypeTime); err != nil {
		t.Fatal(err)
	}
	if err := s.Declare("when", TypeTime); err != nil {
		t.Errorf("re-declare with same type: %v", err)
	}
	if err := s.Declare("when", TypeInt); err == nil {
		t.Errorf("re-declare with another type accepted")
	}
	if err := s.Declare("x", TypeNone); err == nil {
		t.Errorf("declared none")
	}
	if err := s.Declare("$insert_id", TypeInt); err != nil {
		t.Errorf("declare $insert_id: %v (an ordinary property, docs/analytics.md §1)", err)
	}
	if err := s.Declare(strings.Repeat("a", MaxPropNameBytes+1), TypeInt); err == nil {
		t.Errorf("declared over-long name")
	}
	if err := s.Declare("bad\xff", TypeInt); err == nil {
		t.Errorf("declared invalid UTF-8 name")
	}
	v, err := s.Coerce("when", String("2019-10-01"))
	if err != nil || v != Time(1569888000e6) {
		t.Errorf("string into time: %v, %v", v, err)
	}
}

func TestSchemaCloneProps(t *testing.T) {
	s := NewSchema()
	for _, p := range []PropType{{"b", TypeString}, {"a", TypeFloat}, {"c", TypeBool}} {
		if err := s.Declare(p.Name, p.Type); err != nil {
			t.Fatal(err)
		}
	}
	c := s.Clone()
	if err := c.Declare("d", TypeInt); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Type("d"); ok {
		t.Errorf("clone shares state with the original")
	}
	want := []PropType{{"a", TypeFloat}, {"b", TypeString}, {"c", TypeBool}}
	if got := s.Props(); !reflect.DeepEqual(got, want) {
		t.Errorf("Props = %v, want %v", got, want)
	}
	if s.Len() != 3 || c.Len() != 4 {
		t.Errorf("Len = %d, %d", s.Len(), c.Len())
	}
}

func TestSchemaJSON(t *testing.T) {
	s := NewSchema()
	for _, p := range []PropType{{"price", TypeFloat}, {"brand", TypeString}, {"n", TypeInt}, {"ok", TypeBool}, {"at", TypeTime}} {
		if err := s.Declare(p.Name, p.Type); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"at":"time","brand":"string","n":"int","ok":"bool","price":"float"}`
	if string(b) != want {
		t.Errorf("JSON = %s, want %s", b, want)
	}
	back := NewSchema()
	if err := json.Unmarshal(b, back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Props(), s.Props()) {
		t.Errorf("round trip: %v, want %v", back.Props(), s.Props())
	}
	for _, bad := range []string{`{"a":"none"}`, `{"a":"integer"}`, `{"":"int"}`, `[]`, `{"a":1}`} {
		if err := json.Unmarshal([]byte(bad), NewSchema()); err == nil {
			t.Errorf("Unmarshal(%s): no error", bad)
		}
	}
	if _, err := json.Marshal(PropType{Name: "x"}); err == nil {
		t.Errorf("marshalled type none")
	}
}

func TestSchemaCoerceEvent(t *testing.T) {
	s := NewSchema()
	ev := &Event{UserID: "u", Name: "e", Pos: Pos{File: "f.csv", Line: 3}, Props: []Prop{
		{"price", Float(1.5)}, {"n", String("7")}, {"unset", Value{}},
	}}
	if err := s.CoerceEvent(ev); err != nil {
		t.Fatal(err)
	}
	if typ, _ := s.Type("n"); typ != TypeString {
		t.Fatalf("n: type %s, want string (first sighting)", typ)
	}
	// Same column order: coerced through the position cache.
	ev.Props = append(ev.Props[:0], Prop{"price", String("2.5")}, Prop{"n", Int(8)})
	if err := s.CoerceEvent(ev); err != nil {
		t.Fatal(err)
	}
	if ev.Props[0].Value != Float(2.5) || ev.Props[1].Value != String("8") {
		t.Errorf("coerced props = %v", ev.Props)
	}
	// Other order and a new property: the rejected event must not record "fresh".
	ev.Props = append(ev.Props[:0], Prop{"fresh", Int(1)}, Prop{"n", String("x")}, Prop{"price", String("abc")})
	err := s.CoerceEvent(ev)
	var re *RowError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not a *RowError", err)
	}
	if re.Field != "price" || re.Pos.Line != 3 || re.Msg != `expected float, found string "abc"` {
		t.Errorf("RowError = %+v", re)
	}
	if _, ok := s.Type("fresh"); ok {
		t.Errorf("a rejected event recorded a new property")
	}
	// The same new property twice with different types is rejected.
	ev.Props = append(ev.Props[:0], Prop{"fresh", Int(1)}, Prop{"fresh", String("a")})
	if err := s.CoerceEvent(ev); err == nil {
		t.Errorf("new property with two types accepted")
	}
	ev.Props = append(ev.Props[:0], Prop{"fresh", Int(1)}, Prop{"bad\xff", Int(1)})
	if err := s.CoerceEvent(ev); !errors.As(err, &re) || re.Field != "bad\xff" {
		t.Errorf("invalid name: error %v", err)
	}
	ev.Props = append(ev.Props[:0], Prop{"fresh", Int(1)}, Prop{"price", Int(2)})
	if err := s.CoerceEvent(ev); err != nil {
		t.Fatal(err)
	}
	if typ, _ := s.Type("fresh"); typ != TypeInt || ev.Props[1].Value != Float(2) {
		t.Errorf("fresh: %s, price %v", typ, ev.Props[1].Value)
	}
	// Cache hits on the same names and order do not allocate.
	ev.Props = append(ev.Props[:0], Prop{"fresh", Int(1)}, Prop{"price", Float(2)}, Prop{"n", String("z")})
	if n := testing.AllocsPerRun(100, func() {
		if err := s.CoerceEvent(ev); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("CoerceEvent: %v allocs per event", n)
	}
}

func BenchmarkSchemaCoerceEvent(b *testing.B) {
	s := NewSchema()
	ev := &Event{UserID: "u", Name: "e", Props: []Prop{{"a", Int(1)}, {"b", String("x")}, {"c", Float(2)}, {"d", String("3")}}}
	if err := s.CoerceEvent(ev); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ev.Props[2].Value = Int(5)
		if err := s.CoerceEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSchemaWidening: an int property that receives a non-integer number
// becomes float (docs/analytics.md §1), through Coerce and CoerceEvent; a rejected
// event widens nothing; whole floats still coerce to int.
func TestSchemaWidening(t *testing.T) {
	s := NewSchema()
	if _, err := s.Coerce("qty", Int(12)); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Coerce("qty", Float(7)); err != nil || v != Int(7) {
		t.Errorf("7.0 into int: %v %v", v, err)
	}
	if s.Widenings() != 0 {
		t.Fatalf("widened by a whole float")
	}
	if v, err := s.Coerce("qty", Float(12.5)); err != nil || v != Float(12.5) {
		t.Errorf("12.5 into int: %v %v, want a widening", v, err)
	}
	if typ, _ := s.Type("qty"); typ != TypeFloat || s.Widenings() != 1 {
		t.Errorf("after 12.5: %v, %d widenings", typ, s.Widenings())
	}
	if v, err := s.Coerce("qty", Int(3)); err != nil || v != Float(3) {
		t.Errorf("3 into the widened property: %v %v", v, err)
	}
	if _, err := s.Coerce("qty", Bool(true)); err == nil {
		t.Errorf("a bool into a float accepted")
	}
	// CoerceEvent: a rejected event widens nothing.
	if _, err := s.Coerce("n", Int(1)); err != nil {
		t.Fatal(err)
	}
	ev := &Event{UserID: "u", Name: "e", Props: []Prop{{"n", Float(1e20)}, {"qty", String("x")}}}
	if err := s.CoerceEvent(ev); err == nil {
		t.Fatalf("bad event accepted")
	}
	if typ, _ := s.Type("n"); typ != TypeInt {
		t.Errorf("a rejected event widened n to %v", typ)
	}
	ev.Props = []Prop{{"n", Float(1e20)}, {"qty", Int(2)}, {"fresh", Int(1)}}
	if err := s.CoerceEvent(ev); err != nil {
		t.Fatal(err)
	}
	if typ, _ := s.Type("n"); typ != TypeFloat || ev.Props[0].Value != Float(1e20) || ev.Props[1].Value != Float(2) {
		t.Errorf("after an accepted event: n %v, props %v", typ, ev.Props)
	}
	if !s.WidenToFloat("fresh") || s.WidenToFloat("fresh") || s.WidenToFloat("missing") {
		t.Errorf("WidenToFloat: int once, then not")
	}
}
