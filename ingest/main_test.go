package ingest

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/spurdb/spur/event"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// readAll drains r, returning deep copies of the events and the row
// errors; a fatal error fails the test.
func readAll(t testing.TB, r Reader) ([]event.Event, []*event.RowError) {
	t.Helper()
	var evs []event.Event
	var errs []*event.RowError
	var ev event.Event
	for {
		err := r.Next(&ev)
		if err == io.EOF {
			break
		}
		var re *event.RowError
		if errors.As(err, &re) {
			errs = append(errs, re)
			continue
		}
		if err != nil {
			t.Fatalf("fatal error: %v", err)
		}
		c := ev
		c.UserID = strings.Clone(ev.UserID)
		c.Name = strings.Clone(ev.Name)
		c.InsertID = strings.Clone(ev.InsertID)
		c.Props = slices.Clone(ev.Props)
		for i := range c.Props {
			c.Props[i].Value.Str = strings.Clone(c.Props[i].Value.Str)
		}
		evs = append(evs, c)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return evs, errs
}

// openString returns a reader over s.
func openString(t testing.TB, s, name string, opt Options) Reader {
	t.Helper()
	r, err := NewReader(strings.NewReader(s), name, opt)
	if err != nil {
		t.Fatalf("NewReader(%s): %v", name, err)
	}
	return r
}

// prop returns the value of property name of ev, or the zero Value.
func prop(ev event.Event, name string) event.Value {
	for _, p := range ev.Props {
		if p.Name == name {
			return p.Value
		}
	}
	return event.Value{}
}

// micros parses an RFC 3339 instant for expectations.
func micros(t testing.TB, s string) int64 {
	t.Helper()
	us, err := event.ParseTime(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return us
}
