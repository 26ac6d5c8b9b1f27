package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/spurdb/spur/event"
)

// MaxLineBytes is the longest NDJSON or OTTO line a reader accepts; a longer
// line is a fatal error (the input is probably not line-delimited JSON).
const MaxLineBytes = 64 << 20

// lineReader reads physical lines without allocating for lines that fit its
// buffer.
type lineReader struct {
	br    *bufio.Reader
	long  []byte // accumulates a line longer than the buffer
	line  int64  // number of the line last returned, 1-based
	bytes int64  // bytes of the lines returned, line ends included
	name  string
}

func newLineReader(in io.Reader, name string) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(in, 256<<10), name: name}
}

// reset makes l read in from its start, keeping its buffers.
func (l *lineReader) reset(in io.Reader) {
	l.br.Reset(in)
	l.long, l.line, l.bytes = l.long[:0], 0, 0
}

// next returns the next line without its "\n" or "\r\n" (and without a
// UTF-8 byte order mark on line 1), valid until the next call; io.EOF at
// the end; any other error is fatal.
func (l *lineReader) next() ([]byte, error) {
	b, err := l.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		l.long = append(l.long[:0], b...)
		for err == bufio.ErrBufferFull {
			if len(l.long) > MaxLineBytes {
				return nil, fmt.Errorf("%s:%d: line longer than %d bytes", l.name, l.line+1, MaxLineBytes)
			}
			b, err = l.br.ReadSlice('\n')
			l.long = append(l.long, b...)
		}
		b = l.long
	}
	if err != nil && err != io.EOF {
		return nil, readError(fmt.Sprintf("%s:%d", l.name, l.line+1), "read", err)
	}
	if len(b) == 0 {
		return nil, io.EOF
	}
	l.line++
	l.bytes += int64(len(b))
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	if l.line == 1 {
		b = bytes.TrimPrefix(b, []byte("\ufeff"))
	}
	return b, nil
}

// blank reports whether a line holds only JSON whitespace.
func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// scanner is a minimal allocation-free JSON (RFC 8259) scanner over one
// line. Methods that fail record the first error and return false; the
// caller reports err() as a row error.
type scanner struct {
	b   []byte
	i   int
	msg string // first error; "" = none
	at  int    // byte offset of the first error
	tmp []byte // scratch for strings that skip decodes
}

func (s *scanner) reset(b []byte) { *s = scanner{b: b, tmp: s.tmp[:0]} }

// fail records an error at offset at and returns false.
func (s *scanner) fail(at int, msg string) bool {
	if s.msg == "" {
		s.msg, s.at = msg, at
	}
	return false
}

// err renders the recorded error with its 1-based byte column.
func (s *scanner) err() string {
	return "invalid JSON at column " + strconv.Itoa(s.at+1) + ": " + s.msg
}

// ws skips whitespace and returns the next byte, or 0 at the end.
func (s *scanner) ws() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// expect skips whitespace and consumes c.
func (s *scanner) expect(c byte, what string) bool {
	if s.ws() != c {
		return s.fail(s.i, "expected "+what)
	}
	s.i++
	return true
}

// end checks that only whitespace follows.
func (s *scanner) end() bool {
	if s.ws() != 0 {
		return s.fail(s.i, "unexpected data after the JSON value")
	}
	return true
}

// str decodes the string at s.i (which must start with '"') and appends its
// content to dst. Invalid UTF-8 and raw control characters are errors; a
// lone surrogate escape decodes to U+FFFD, as in encoding/json.
func (s *scanner) str(dst []byte) ([]byte, bool) {
	if s.ws() != '"' {
		return dst, s.fail(s.i, "expected a string")
	}
	i := s.i + 1
	for {
		start := i
		var high byte // OR of the bytes: ≥ 0x80 when not all ASCII
		for i < len(s.b) {
			c := s.b[i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			high |= c
			i++
		}
		if i >= len(s.b) {
			return dst, s.fail(s.i, "unterminated string")
		}
		seg := s.b[start:i]
		if high >= utf8.RuneSelf && !utf8.Valid(seg) {
			return dst, s.fail(start, "invalid UTF-8 in string")
		}
		dst = append(dst, seg...)
		switch c := s.b[i]; {
		case c == '"':
			s.i = i + 1
			return dst, true
		case c < 0x20:
			return dst, s.fail(i, "control character in string")
		}
		i++ // backslash
		if i >= len(s.b) {
			return dst, s.fail(i, "unterminated string")
		}
		switch c := s.b[i]; c {
		case '"', '\\', '/':
			dst = append(dst, c)
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(s.b, i+1)
			if !ok {
				return dst, s.fail(i, `invalid \u escape`)
			}
			i += 4
			if utf16.IsSurrogate(r) {
				r2, ok := rune(0), false
				if i+6 < len(s.b) && s.b[i+1] == '\\' && s.b[i+2] == 'u' {
					r2, ok = hex4(s.b, i+3)
				}
				if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, s.fail(i, "invalid escape")
		}
		i++
	}
}

// hex4 decodes four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// number scans a JSON number at s.i and returns its text and whether it is
// an integer literal (no fraction, no exponent).
func (s *scanner) number() (raw []byte, isInt, ok bool) {
	start, i := s.i, s.i
	digits := func() bool {
		d := i
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
		return i > d
	}
	if i < len(s.b) && s.b[i] == '-' {
		i++
	}
	switch {
	case i < len(s.b) && s.b[i] == '0':
		i++
	case !digits():
		return nil, false, s.fail(i, "invalid number")
	}
	isInt = true
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if !digits() {
			return nil, false, s.fail(i, "invalid number")
		}
		isInt = false
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false, s.fail(i, "invalid number")
		}
		isInt = false
	}
	s.i = i
	return s.b[start:i], isInt, true
}

// more consumes what follows an object member: ',' (more members: true)
// or '}' (the object's end: false). Anything else is recorded as an error
// and ok is false.
func (s *scanner) more() (more, ok bool) {
	switch s.ws() {
	case ',':
		s.i++
		return true, true
	case '}':
		s.i++
		return false, true
	}
	return false, s.fail(s.i, "expected ',' or '}'")
}

// moreItems consumes what follows an array element: ',' (more elements:
// true) or ']' (the array's end: false). Anything else is recorded as an
// error and ok is false.
func (s *scanner) moreItems() (more, ok bool) {
	switch s.ws() {
	case ',':
		s.i++
		return true, true
	case ']':
		s.i++
		return false, true
	}
	return false, s.fail(s.i, "expected ',' or ']'")
}

// epochNumber converts a JSON number (raw, from number) holding a Unix
// epoch timestamp to UTC microseconds by the magnitude rule
// (event.EpochToMicros, event.EpochFloatToMicros).
func epochNumber(raw []byte, isInt bool) (int64, error) {
	if isInt {
		n, err := parseInt(raw)
		if err != nil {
			return 0, err
		}
		return event.EpochToMicros(n)
	}
	f, err := parseFloat(raw)
	if err != nil {
		return 0, err
	}
	return event.EpochFloatToMicros(f)
}

// errIntRange is returned by parseInt for an integer outside int64.
var errIntRange = errors.New("integer out of the int64 range")

// parseInt parses a JSON integer literal (as returned by number).
func parseInt(raw []byte) (int64, error) {
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	var n uint64
	for _, c := range raw {
		d := uint64(c - '0')
		if n > (1<<63-d)/10 {
			return 0, errIntRange
		}
		n = n*10 + d
	}
	if neg {
		return -int64(n), nil // -(1<<63) wraps to MinInt64
	}
	if n > 1<<63-1 {
		return 0, errIntRange
	}
	return int64(n), nil
}

// parseFloat parses a JSON number literal as a finite float64.
func parseFloat(raw []byte) (float64, error) {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, errors.New("number out of the float64 range")
	}
	return f, nil
}

// literal consumes true, false or null at s.i.
func (s *scanner) literal() (kind byte, ok bool) {
	rest := s.b[s.i:]
	for _, w := range [...]string{"true", "false", "null"} {
		if len(rest) >= len(w) && string(rest[:len(w)]) == w {
			s.i += len(w)
			return w[0], true
		}
	}
	return 0, s.fail(s.i, "invalid literal")
}

// maxDepth bounds the nesting skip follows.
const maxDepth = 64

// skip consumes any JSON value at s.i.
func (s *scanner) skip(depth int) bool {
	if depth > maxDepth {
		return s.fail(s.i, "nested too deeply")
	}
	switch c := s.ws(); {
	case c == '"':
		var ok bool
		s.tmp, ok = s.str(s.tmp[:0])
		return ok
	case c == '-' || (c >= '0' && c <= '9'):
		_, _, ok := s.number()
		return ok
	case c == 't' || c == 'f' || c == 'n':
		_, ok := s.literal()
		return ok
	case c == '[':
		s.i++
		if s.ws() == ']' {
			s.i++
			return true
		}
		for {
			if !s.skip(depth + 1) {
				return false
			}
			if more, ok := s.moreItems(); !ok {
				return false
			} else if !more {
				return true
			}
		}
	case c == '{':
		s.i++
		if s.ws() == '}' {
			s.i++
			return true
		}
		for {
			var ok bool
			if s.tmp, ok = s.str(s.tmp[:0]); !ok || !s.expect(':', "':'") || !s.skip(depth+1) {
				return false
			}
			if more, ok := s.more(); !more {
				return ok
			}
		}
	}
	return s.fail(s.i, "expected a JSON value")
}
