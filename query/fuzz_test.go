package query

import (
	"encoding/json"
	"testing"
)

// FuzzParse: any input either parses or returns an *Error with code
// invalid_query; a parsed query survives a JSON round trip unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range append([]string{genTrend, genFunnel, genRet, `{}`, `{"kind":"funnel","steps":[{"event":"a","where":[{"property":"p","op":"eq","value":1}]}]}`, `[`, `{"kind":1}`}, genKindQueries...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		q, err := Parse(data)
		if err != nil {
			if qe, ok := err.(*Error); !ok || qe.Code != CodeInvalidQuery {
				t.Fatalf("error %#v is not an invalid_query *Error", err)
			}
			return
		}
		b, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		q2, err := Parse(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		b2, _ := json.Marshal(q2)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the query:\n%s\n%s", b, b2)
		}
	})
}

// FuzzParseDuration: never panics; accepted durations are non-negative.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "30m", "12h", "7d", "2w", "", "-1d", "99999999999999999999w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseDuration(s); err == nil && d < 0 {
			t.Fatalf("%q → %d", s, d)
		}
	})
}
