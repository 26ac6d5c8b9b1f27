package event

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"abc", `"abc"`},
		{strings.Repeat("a", 32), `"` + strings.Repeat("a", 32) + `"`},
		{strings.Repeat("a", 33), `"` + strings.Repeat("a", 32) + `"… (33 bytes)`},
		{"\x00\xff\n", `"\x00\xff\n"`},
		// A rune is not cut: 31 bytes + "é" (2 bytes) → the "é" goes.
		{strings.Repeat("a", 31) + "éé", `"` + strings.Repeat("a", 31) + `"… (35 bytes)`},
		{strings.Repeat("\xf7", 100), `"` + strings.Repeat(`\xf7`, 32) + `"… (100 bytes)`},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzQuote: the excerpt is short, valid UTF-8, and a prefix of the input.
func FuzzQuote(f *testing.F) {
	f.Add("abc")
	f.Add(strings.Repeat("é", 40))
	f.Add("\xf7\x9f\xa4\x8e\xdcw\b\x83\xab\xbc\xcf\xd1*+w@S\xa4b\xb2\xaa\x98\xf9\x00\xa7\x05\xa5+䯰\xb7\x8f\xce")
	f.Fuzz(func(t *testing.T, s string) {
		q := Quote(s)
		if !utf8.ValidString(q) || len(q) > 4*QuoteMaxBytes+32 {
			t.Fatalf("Quote(%q) = %q: not short valid UTF-8", s, q)
		}
		if long := len(s) > QuoteMaxBytes; long != strings.HasSuffix(q, "… ("+strconv.Itoa(len(s))+" bytes)") {
			t.Fatalf("Quote(%q) = %q: ellipsis iff longer than %d bytes", s, q, QuoteMaxBytes)
		}
	})
}
