package query

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// formula is a compiled trend formula (docs/analytics.md §12): an expression over the
// series lettered A, B, … in query order.
//
// Grammar (whitespace between tokens is ignored):
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/") unary }
//	unary   = "-" unary | primary
//	primary = number | letter | "(" expr ")"
//	number  = digit { digit } [ "." digit { digit } ]
//	letter  = "A" … "Z" (or a … z)
type formula struct {
	src  string
	root *fnode
}

// fnode is a node of a formula's tree: an operator with operands, a
// number or a series (by index).
type fnode struct {
	op     byte // '+', '-', '*', '/', 'n' (negation), '#' (number), 'A' (series)
	num    float64
	series int
	l, r   *fnode
}

// maxFormulaDepth bounds nesting (parentheses, unary minus), so that a
// hostile formula cannot exhaust the stack.
const maxFormulaDepth = 100

// formulaError is a grammar error at a character position (0-based;
// 1-based in messages).
type formulaError struct {
	pos int
	msg string
}

func (e *formulaError) Error() string { return fmt.Sprintf("at position %d: %s", e.pos+1, e.msg) }

// errAt returns a formulaError at byte offset i of the source, counted in
// characters.
func (p *fparser) errAt(i int, format string, args ...any) *formulaError {
	return &formulaError{pos: utf8.RuneCountInString(p.src[:i]), msg: fmt.Sprintf(format, args...)}
}

// parseFormula compiles src over series series (letters A … up to the
// series count). The error, a *formulaError, names the position and what
// was expected or found.
func parseFormula(src string, series int) (*formula, error) {
	p := &fparser{src: src, series: series}
	p.skip()
	if p.i == len(src) {
		return nil, &formulaError{msg: "empty formula"}
	}
	root, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	p.skip()
	if p.i < len(src) {
		return nil, p.errAt(p.i, "unexpected %s, want an operator (+ - * /) or the end", p.what())
	}
	return &formula{src: src, root: root}, nil
}

type fparser struct {
	src    string
	i      int
	series int
}

func (p *fparser) skip() {
	for p.i < len(p.src) && (p.src[p.i] == ' ' || p.src[p.i] == '\t' || p.src[p.i] == '\n' || p.src[p.i] == '\r') {
		p.i++
	}
}

// what describes the character at the parser's position.
func (p *fparser) what() string {
	if p.i >= len(p.src) {
		return "end of formula"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.i:])
	return strconv.QuoteRune(r)
}

func (p *fparser) expr(depth int) (*fnode, error) { return p.binary(depth, '+', '-', p.term) }

func (p *fparser) term(depth int) (*fnode, error) { return p.binary(depth, '*', '/', p.unary) }

// binary parses operand { (op1 | op2) operand }, left-associative.
func (p *fparser) binary(depth int, op1, op2 byte, operand func(int) (*fnode, error)) (*fnode, error) {
	l, err := operand(depth)
	if err != nil {
		return nil, err
	}
	for {
		p.skip()
		if p.i == len(p.src) || (p.src[p.i] != op1 && p.src[p.i] != op2) {
			return l, nil
		}
		op := p.src[p.i]
		p.i++
		r, err := operand(depth)
		if err != nil {
			return nil, err
		}
		l = &fnode{op: op, l: l, r: r}
	}
}

func (p *fparser) unary(depth int) (*fnode, error) {
	if depth > maxFormulaDepth {
		return nil, p.errAt(p.i, "nested deeper than %d levels", maxFormulaDepth)
	}
	p.skip()
	if p.i < len(p.src) && p.src[p.i] == '-' {
		p.i++
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return &fnode{op: 'n', l: x}, nil
	}
	return p.primary(depth)
}

func (p *fparser) primary(depth int) (*fnode, error) {
	p.skip()
	if p.i == len(p.src) {
		return nil, p.errAt(p.i, "unexpected end of formula, want a number, a series letter or (")
	}
	c := p.src[p.i]
	switch {
	case c == '(':
		open := p.i
		p.i++
		x, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		p.skip()
		if p.i == len(p.src) || p.src[p.i] != ')' {
			return nil, p.errAt(p.i, "unexpected %s, want ) to close the ( at position %d", p.what(), utf8.RuneCountInString(p.src[:open])+1)
		}
		p.i++
		return x, nil
	case c >= '0' && c <= '9':
		start := p.i
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
		}
		if p.i < len(p.src) && p.src[p.i] == '.' {
			p.i++
			if p.i == len(p.src) || p.src[p.i] < '0' || p.src[p.i] > '9' {
				return nil, p.errAt(p.i, "unexpected %s, want a digit after the decimal point", p.what())
			}
			for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
				p.i++
			}
		}
		v, err := strconv.ParseFloat(p.src[start:p.i], 64)
		if err != nil {
			return nil, p.errAt(start, "number %q out of range", p.src[start:p.i])
		}
		return &fnode{op: '#', num: v}, nil
	case (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'):
		if p.i+1 < len(p.src) && ((p.src[p.i+1] >= 'A' && p.src[p.i+1] <= 'Z') || (p.src[p.i+1] >= 'a' && p.src[p.i+1] <= 'z')) {
			return nil, p.errAt(p.i, "a series is one letter (A, B, …); found a word")
		}
		s := int(c - 'A')
		if c >= 'a' {
			s = int(c - 'a')
		}
		if s >= p.series {
			return nil, p.errAt(p.i, "letter %c has no series (the query has %d: %s)", c, p.series, letters(p.series))
		}
		p.i++
		return &fnode{op: 'A', series: s}, nil
	}
	return nil, p.errAt(p.i, "unexpected %s, want a number, a series letter or (", p.what())
}

// letters lists the letters of n series ("A, B, C").
func letters(n int) string {
	s := ""
	for i := range min(n, 26) {
		if i > 0 {
			s += ", "
		}
		s += string(rune('A' + i))
	}
	return s
}

// eval evaluates the formula on the series' values (vals[i] is series
// i's value). ok is false — the result is null — when a division is by
// zero or an operand has no value (docs/analytics.md §12), and when the result is not
// a finite number (an overflow: JSON has no infinities). -0 is returned
// as 0.
func (f *formula) eval(vals []float64) (float64, bool) {
	v, ok := f.root.eval(vals)
	if !ok || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v + 0, true // -0 as 0
}

func (n *fnode) eval(vals []float64) (float64, bool) {
	switch n.op {
	case '#':
		return n.num, true
	case 'A':
		return vals[n.series], true
	case 'n':
		v, ok := n.l.eval(vals)
		return -v, ok
	}
	a, ok := n.l.eval(vals)
	if !ok {
		return 0, false
	}
	b, ok := n.r.eval(vals)
	if !ok {
		return 0, false
	}
	switch n.op {
	case '+':
		return a + b, true
	case '-':
		return a - b, true
	case '*':
		return a * b, true
	}
	if b == 0 {
		return 0, false
	}
	return a / b, true
}
