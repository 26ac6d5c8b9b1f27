package event

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestCoerce(t *testing.T) {
	day := time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	ok := []struct {
		in   Value
		to   Type
		want Value
	}{
		{String("42"), TypeInt, Int(42)},
		{String("-7"), TypeInt, Int(-7)},
		{String("9223372036854775807"), TypeInt, Int(math.MaxInt64)},
		{String("4.5"), TypeFloat, Float(4.5)},
		{String("42"), TypeFloat, Float(42)},
		{String("1e3"), TypeFloat, Float(1000)},
		{String("true"), TypeBool, Bool(true)},
		{String("False"), TypeBool, Bool(false)},
		{String("TRUE"), TypeBool, Bool(true)},
		{String("2019-10-01T00:00:00Z"), TypeTime, Time(day)},
		{String("2019-10-01 00:00:00 UTC"), TypeTime, Time(day)},
		{String("1569888000"), TypeTime, Time(day)},
		{Int(3), TypeFloat, Float(3)},
		{Int(1 << 53), TypeFloat, Float(1 << 53)},
		{Int(-(1 << 53)), TypeFloat, Float(-(1 << 53))},
		{Float(3), TypeInt, Int(3)},
		{Float(-1e18), TypeInt, Int(-1e18)},
		{Float(math.MinInt64), TypeInt, Int(math.MinInt64)},
		{Int(1569888000), TypeTime, Time(day)},
		{Int(1569888000000), TypeTime, Time(day)},
		{Float(1569888000.5), TypeTime, Time(day + 500000)},
		{Int(42), TypeString, String("42")},
		{Float(4.5), TypeString, String("4.5")},
		{Bool(true), TypeString, String("true")},
		{Time(day), TypeString, String("2019-10-01T00:00:00Z")},
		{String("x"), TypeString, String("x")},
		{Value{}, TypeInt, Value{}},
	}
	for _, tc := range ok {
		got, err := Coerce(tc.in, tc.to)
		if err != nil {
			t.Errorf("Coerce(%v %s, %s): %v", tc.in.Type, tc.in, tc.to, err)
			continue
		}
		if got != tc.want {
			t.Errorf("Coerce(%v %s, %s) = %+v, want %+v", tc.in.Type, tc.in, tc.to, got, tc.want)
		}
	}
	bad := []struct {
		in   Value
		to   Type
		want string
	}{
		{String("abc"), TypeInt, `expected int, found string "abc"`},
		{String("4.5"), TypeInt, `expected int, found string "4.5"`},
		{String("4.0"), TypeInt, `expected int, found string "4.0"`},
		{String("9223372036854775808"), TypeInt, `expected int, found string "9223372036854775808"`},
		{String(""), TypeInt, `expected int, found string ""`},
		{String("0x10"), TypeFloat, `expected float, found string "0x10"`},
		{String("NaN"), TypeFloat, `expected float, found string "NaN"`},
		{String("Inf"), TypeFloat, `expected float, found string "Inf"`},
		{String("1e400"), TypeFloat, `expected float, found string "1e400"`},
		{String("1_000"), TypeFloat, `expected float, found string "1_000"`},
		{String("1"), TypeBool, `expected bool, found string "1"`},
		{String("yes"), TypeBool, `expected bool, found string "yes"`},
		{String("2021-13-01"), TypeTime, `expected time, found string "2021-13-01"`},
		{Int(1<<53 + 1), TypeFloat, `expected float, found int 9007199254740993`},
		{Float(3.5), TypeInt, `expected int, found float 3.5`},
		{Float(1e19), TypeInt, `expected int, found float 1e+19`},
		{Float(math.NaN()), TypeInt, `expected int, found float NaN`},
		{Float(math.NaN()), TypeTime, `expected time, found float NaN`},
		{Bool(true), TypeInt, `expected int, found bool true`},
		{Int(1), TypeBool, `expected bool, found int 1`},
		{Time(0), TypeInt, `expected int, found time 1970-01-01T00:00:00Z`},
		{Int(math.MaxInt64), TypeTime, `expected time, found int 9223372036854775807`},
		{String(strings.Repeat("a", 100)), TypeInt, `expected int, found string "` + strings.Repeat("a", 32) + `"… (100 bytes)`},
	}
	for _, tc := range bad {
		_, err := Coerce(tc.in, tc.to)
		if err == nil {
			t.Errorf("Coerce(%v %s, %s): no error", tc.in.Type, tc.in, tc.to)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("Coerce(%v %s, %s): error %q, want %q", tc.in.Type, tc.in, tc.to, err, tc.want)
		}
	}
}

func TestCoerceInLocation(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	got, err := CoerceIn(String("2019-10-01 09:00:00"), TypeTime, tokyo)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2019, 10, 1, 0, 0, 0, 0, time.UTC).UnixMicro(); got != Time(want) {
		t.Errorf("got %s, want %s", got, Time(want))
	}
}

func FuzzCoerce(f *testing.F) {
	f.Add("42", uint8(TypeInt))
	f.Add("4.5", uint8(TypeFloat))
	f.Add("true", uint8(TypeBool))
	f.Add("2019-10-01 00:00:00 UTC", uint8(TypeTime))
	f.Add("abc", uint8(TypeInt))
	f.Fuzz(func(t *testing.T, s string, to uint8) {
		typ := Type(to % 6)
		v, err := Coerce(String(s), typ)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "expected "+typ.String()+", found string ") {
				t.Fatalf("Coerce(%q, %s): unexpected error text %q", s, typ, err)
			}
			return
		}
		if v.Type != typ {
			t.Fatalf("Coerce(%q, %s) returned type %s", s, typ, v.Type)
		}
		// A coerced value renders to a string that coerces to the same value.
		again, err := Coerce(String(v.String()), typ)
		if err != nil || again != v {
			t.Fatalf("Coerce(%q, %s) = %+v, but its rendering %q coerces to %+v, %v", s, typ, v, v.String(), again, err)
		}
		if typ == TypeFloat && (math.IsNaN(v.Float) || math.IsInf(v.Float, 0)) {
			t.Fatalf("Coerce(%q, float) = %v, want finite", s, v.Float)
		}
	})
}
