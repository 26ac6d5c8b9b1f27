package ingest

import (
	"io"

	"github.com/spurdb/spur/event"
)

// ndjsonReader reads one JSON object per line (NDJSON / JSON Lines). Two
// shapes are accepted, also mixed: the canonical
//
//	{"user_id": "u1", "timestamp": "…", "event": "view", "insert_id": "…", "properties": {"price": 4.5}}
//
// and flat objects, where every top-level key other than the named columns
// is a property. Column names follow Options. JSON values map to property
// types as: string → string (the app's schema coerces later), integer
// literal → int, other numbers → float, true/false → bool, null → not set.
// Nested objects and arrays as property values are rejected with a row
// error (flatten them first). The user id may be a string or an integer
// literal, the insert id too; the timestamp a string (event.ParseTime) or a
// number (epoch magnitude rule). Blank lines are skipped.
type ndjsonReader struct {
	*source
	opt    Options
	lines  *lineReader
	sc     scanner
	keys   keyCache
	keyBuf []byte
	keyPos int          // position of the next key in the row, for keyCache
	arena  []byte       // decoded string bytes of the row
	spans  []span       // per ev.Props entry: its string in arena
	decl   []event.Type // per ev.Props entry: declared type or TypeNone
	row    ndRow
}

// span is a string in the row's arena.
type span struct {
	start, end int32
	set        bool
}

// ndRow holds the named columns of the row being parsed.
type ndRow struct {
	user, name, insert, timeStr span
	timeUS                      int64
	timeNum                     bool // timeUS holds a numeric timestamp
}

func newNDJSONReader(in io.Reader, src *source, opt Options) (*ndjsonReader, error) {
	r := &ndjsonReader{source: src, opt: opt, lines: newLineReader(in, src.name)}
	r.keys.init(&r.opt)
	return r, nil
}

// Next implements Reader.
func (r *ndjsonReader) Next(ev *event.Event) error {
	for {
		line, err := r.lines.next()
		if err != nil {
			return err
		}
		if !blank(line) {
			return r.parse(line, ev)
		}
	}
}

func (r *ndjsonReader) parse(line []byte, ev *event.Event) error {
	pos := r.pos(r.lines.line)
	ev.Pos = pos
	ev.Props = ev.Props[:0]
	r.arena, r.spans, r.decl = r.arena[:0], r.spans[:0], r.decl[:0]
	r.row = ndRow{}
	r.keyPos = 0
	s := &r.sc
	s.reset(line)
	if s.ws() != '{' {
		return rowErr(pos, "", "expected a JSON object per line")
	}
	s.i++
	if err := r.members(ev, pos, true); err != nil {
		return err
	}
	if !s.end() {
		return rowErr(pos, "", s.err())
	}
	return r.finish(ev, pos)
}

// members parses the members of an object whose '{' was consumed; top is
// false inside "properties", where every key is a property.
func (r *ndjsonReader) members(ev *event.Event, pos event.Pos, top bool) error {
	s := &r.sc
	if s.ws() == '}' {
		s.i++
		return nil
	}
	for {
		var ok bool
		if r.keyBuf, ok = s.str(r.keyBuf[:0]); !ok || !s.expect(':', "':' after an object key") {
			return rowErr(pos, "", s.err())
		}
		k := r.keys.lookup(r.keyPos, r.keyBuf)
		r.keyPos++
		rl := roleProp
		if top {
			rl = k.role
		}
		if err := r.value(ev, pos, k, rl); err != nil {
			return err
		}
		if more, ok := s.more(); !ok {
			return rowErr(pos, "", s.err())
		} else if !more {
			return nil
		}
	}
}

// value parses the value of key k in role rl.
func (r *ndjsonReader) value(ev *event.Event, pos event.Pos, k *keyInfo, rl role) error {
	s := &r.sc
	c := s.ws()
	if rl == roleProperties {
		switch c {
		case '{':
			s.i++
			return r.members(ev, pos, false)
		case 'n':
			if _, ok := s.literal(); !ok {
				return rowErr(pos, "", s.err())
			}
			return nil
		}
		rl = roleProp // not an object: an ordinary property named "properties"
	}
	if rl != roleProp {
		return r.column(pos, k, rl, c)
	}
	if k.bad != "" {
		return rowErr(pos, k.name, k.bad)
	}
	var v event.Value
	var sp span
	switch {
	case c == '"':
		start := len(r.arena)
		var ok bool
		if r.arena, ok = s.str(r.arena); !ok {
			return rowErr(pos, "", s.err())
		}
		v.Type = event.TypeString
		sp = span{int32(start), int32(len(r.arena)), true}
	case c == 't' || c == 'f' || c == 'n':
		kind, ok := s.literal()
		if !ok {
			return rowErr(pos, "", s.err())
		}
		if kind == 'n' {
			return nil // not set
		}
		v = event.Bool(kind == 't')
	case c == '-' || (c >= '0' && c <= '9'):
		raw, isInt, ok := s.number()
		if !ok {
			return rowErr(pos, "", s.err())
		}
		if isInt {
			n, err := parseInt(raw)
			if err != nil {
				return rowErr(pos, k.name, err.Error())
			}
			v = event.Int(n)
		} else {
			f, err := parseFloat(raw)
			if err != nil {
				return rowErr(pos, k.name, err.Error())
			}
			v = event.Float(f)
		}
	case c == '{' || c == '[':
		return rowErr(pos, k.name, "nested objects and arrays are not supported; flatten them into top-level properties")
	default:
		s.fail(s.i, "expected a JSON value")
		return rowErr(pos, "", s.err())
	}
	ev.Props = append(ev.Props, event.Prop{Name: k.name, Value: v})
	r.spans = append(r.spans, sp)
	r.decl = append(r.decl, k.decl)
	return nil
}

// column parses the value of a named column (user, time, event, insert id).
func (r *ndjsonReader) column(pos event.Pos, k *keyInfo, rl role, c byte) error {
	s := &r.sc
	var sp *span
	switch rl {
	case roleUser:
		sp = &r.row.user
	case roleEvent:
		sp = &r.row.name
	case roleInsertID:
		sp = &r.row.insert
	default:
		sp = &r.row.timeStr
		if r.row.timeNum {
			return rowErr(pos, k.name, "given twice")
		}
	}
	if sp.set {
		return rowErr(pos, k.name, "given twice")
	}
	switch {
	case c == '"':
		start := len(r.arena)
		var ok bool
		if r.arena, ok = s.str(r.arena); !ok {
			return rowErr(pos, "", s.err())
		}
		*sp = span{int32(start), int32(len(r.arena)), true}
		return nil
	case c == 'n':
		if _, ok := s.literal(); !ok {
			return rowErr(pos, "", s.err())
		}
		return nil // null: as if absent
	case c == '-' || (c >= '0' && c <= '9'):
		raw, isInt, ok := s.number()
		if !ok {
			return rowErr(pos, "", s.err())
		}
		switch rl {
		case roleEvent:
			return rowErr(pos, k.name, "expected a string, found a number")
		case roleTime:
			us, err := epochNumber(raw, isInt)
			if err != nil {
				return rowErr(pos, k.name, err.Error())
			}
			r.row.timeUS, r.row.timeNum = us, true
			return nil
		}
		if !isInt {
			return rowErr(pos, k.name, "expected a string or an integer, found a number with a fraction or exponent")
		}
		start := len(r.arena)
		r.arena = append(r.arena, raw...)
		*sp = span{int32(start), int32(len(r.arena)), true}
		return nil
	case c == 't' || c == 'f':
		return rowErr(pos, k.name, "expected a string, found a boolean")
	case c == '{' || c == '[':
		return rowErr(pos, k.name, "expected a string, found an object or array")
	}
	s.fail(s.i, "expected a JSON value")
	return rowErr(pos, "", s.err())
}

// finish materialises the row's strings (one allocation for all of them)
// and checks the named columns, declared types and repeated properties.
func (r *ndjsonReader) finish(ev *event.Event, pos event.Pos) error {
	o := &r.opt
	var all string
	if len(r.arena) > 0 {
		all = string(r.arena)
	}
	sub := func(sp span) string { return all[sp.start:sp.end] }
	row := &r.row
	if !row.user.set {
		return rowErr(pos, o.UserCol, "missing user id")
	}
	ev.UserID = sub(row.user)
	if err := o.checkUser(pos, ev.UserID); err != nil {
		return err
	}
	ev.Name = ""
	if !o.Users {
		if !row.name.set {
			return rowErr(pos, o.EventCol, "missing event name")
		}
		ev.Name = sub(row.name)
		if err := o.checkEvent(pos, ev.Name); err != nil {
			return err
		}
	}
	ev.InsertID = ""
	if row.insert.set {
		ev.InsertID = sub(row.insert)
		if err := o.checkValue(pos, o.InsertIDCol, event.String(ev.InsertID)); err != nil {
			return err
		}
	}
	switch {
	case row.timeStr.set:
		us, err := event.ParseTime(sub(row.timeStr), o.Loc)
		if err != nil {
			return rowErr(pos, o.TimeCol, err.Error())
		}
		ev.Time = us
	case row.timeNum:
		ev.Time = row.timeUS
	case o.Users:
		ev.Time = o.ImportTime
	default:
		return rowErr(pos, o.TimeCol, "missing timestamp")
	}
	for i := range ev.Props {
		p := &ev.Props[i]
		for j := range i {
			if ev.Props[j].Name == p.Name {
				return rowErr(pos, p.Name, "property given twice")
			}
		}
		if p.Value.Type == event.TypeString {
			p.Value.Str = sub(r.spans[i])
			if err := o.checkValue(pos, p.Name, p.Value); err != nil {
				return err
			}
		}
		if t := r.decl[i]; t != event.TypeNone {
			v, err := event.CoerceIn(p.Value, t, o.Loc)
			if err != nil {
				return rowErr(pos, p.Name, err.Error())
			}
			p.Value = v
		}
	}
	return nil
}

// keyInfo is an interned JSON key with what it means at the top level.
type keyInfo struct {
	name string
	role role
	decl event.Type // declared type from Options.Schema, or TypeNone
	bad  string     // why the name is not a valid property name, or ""
}

// roleProperties marks the top-level "properties" object.
const roleProperties role = 255

// maxInternedKeys bounds the key map against inputs with ever-new keys;
// beyond it keys are allocated per use.
const maxInternedKeys = 1 << 16

// keyCache interns keys. Rows usually repeat their keys in the same order,
// so it first compares the key with the one seen at the same position of
// the previous rows (no map lookup), then falls back to a map.
type keyCache struct {
	opt   *Options
	byPos []*keyInfo
	m     map[string]*keyInfo
}

func (c *keyCache) init(o *Options) {
	c.opt = o
	c.m = make(map[string]*keyInfo)
}

// lookup returns the key b seen at position pos of the row.
func (c *keyCache) lookup(pos int, b []byte) *keyInfo {
	if pos < len(c.byPos) {
		if k := c.byPos[pos]; k != nil && k.name == string(b) {
			return k
		}
	}
	k, ok := c.m[string(b)]
	if !ok {
		name := string(b)
		k = &keyInfo{name: name, role: c.opt.roleOf(name), decl: c.opt.Schema[name]}
		if k.role == roleProp && name == "properties" {
			k.role = roleProperties
		}
		if err := event.ValidatePropName(name); err != nil {
			k.bad = err.Error()
		}
		if len(c.m) < maxInternedKeys {
			c.m[name] = k
		}
	}
	if pos < 256 {
		for len(c.byPos) <= pos {
			c.byPos = append(c.byPos, nil)
		}
		c.byPos[pos] = k
	}
	return k
}
