package event

import (
	"strconv"
	"unicode/utf8"
)

// QuoteMaxBytes is how many bytes of a value Quote shows.
const QuoteMaxBytes = 32

// Quote renders an input value for an error message: Go-quoted (control
// characters, invalid UTF-8 and non-printable runes escaped) and, when it
// is longer than QuoteMaxBytes bytes, cut to at most that many bytes at a
// rune boundary and followed by "…" and its total length:
//
//	"abc"
//	"\xf7\x9f\xa4\x8e\xdcw\b\x83\xab\xbc\xcf\xd1*+w@S\xa4b\xb2"… (2000 bytes)
//
// so that a message never carries more than a short, safe excerpt of bad
// input. It allocates the returned string only.
func Quote(s string) string {
	if len(s) <= QuoteMaxBytes {
		return strconv.Quote(s)
	}
	cut := QuoteMaxBytes
	// Back off to the start of a rune; invalid bytes are their own runes.
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(s[cut]); i++ {
		cut--
	}
	if !utf8.RuneStart(s[cut]) {
		cut = QuoteMaxBytes // not UTF-8 around the cut: cut bytes
	}
	b := make([]byte, 0, 3*QuoteMaxBytes+24)
	b = strconv.AppendQuote(b, s[:cut])
	b = append(b, "… ("...)
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, " bytes)"...)
	return string(b)
}
