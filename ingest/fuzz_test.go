package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/spurdb/spur/event"
)

// drain reads r to the end, checking the Reader contract: every event
// passes the spec limits, every row error has a position, and the reader
// terminates. It returns the events' lines and the row errors.
func drain(t *testing.T, r Reader, users bool, maxRows int) (map[int64][]event.Event, []*event.RowError) {
	t.Helper()
	defer r.Close()
	evs := map[int64][]event.Event{}
	var errs []*event.RowError
	var ev event.Event
	for n := 0; ; n++ {
		if n > maxRows {
			t.Fatalf("reader did not stop after %d rows", maxRows)
		}
		err := r.Next(&ev)
		if err == io.EOF {
			return evs, errs
		}
		var re *event.RowError
		if errors.As(err, &re) {
			if re.Pos.Line <= 0 {
				t.Fatalf("row error without a line: %v", re)
			}
			errs = append(errs, re)
			continue
		}
		if err != nil {
			return evs, errs // fatal errors are allowed on garbage
		}
		check := event.ValidateEvent
		if users {
			check = event.ValidateUser
		}
		if err := check(&ev); err != nil {
			t.Fatalf("reader returned an invalid event %+v: %v", ev, err)
		}
		for _, p := range ev.Props {
			if err := event.CheckValueBytes(p.Value, event.DefaultMaxPropertyBytes); err != nil {
				t.Fatalf("reader returned property %q over the default limit: %v", p.Name, err)
			}
		}
		c := ev
		c.Props = append([]event.Prop(nil), ev.Props...)
		evs[ev.Pos.Line] = append(evs[ev.Pos.Line], c)
	}
}

func FuzzCSV(f *testing.F) {
	f.Add([]byte("user_id,timestamp,event,price,plan\nu1,2021-05-01T10:00:00Z,view,10,free\nu2,2021-13-01,view,x,\n"), false)
	f.Add([]byte("\ufeffuser_id,timestamp,event,note\nu1,1620000000,e,\"two\nlines\"\nu2,1,e\n\"a\"b,1,e,x\n"), false)
	f.Add([]byte("user_id,plan,seen\nu1,pro,2021-05-01\n,x,y\n"), true)
	f.Add([]byte("user_id,timestamp,event,insert_id,b\nu,2019-10-01 00:00:00 UTC,e,i,true\nu,1,e,,false\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, users bool) {
		r, err := NewReader(bytes.NewReader(data), "f.csv", Options{Users: users})
		if err != nil {
			return
		}
		evs, _ := drain(t, r, users, bytes.Count(data, []byte("\n"))+2)
		for line, es := range evs {
			if line < 2 || len(es) != 1 {
				t.Fatalf("line %d: %d events", line, len(es))
			}
		}
	})
}

func FuzzNDJSON(f *testing.F) {
	f.Add([]byte(`{"user_id":"u1","timestamp":"2021-05-01T10:00:00Z","event":"view","insert_id":"a","properties":{"price":4.5,"n":3,"ok":true,"s":"x"}}` + "\n"))
	f.Add([]byte(`{"user_id":42,"timestamp":1620000000000,"event":"buy","s":"caf\u00e9 \ud83d\ude00 \"q\"","p":null,"f":-1.5e3}` + "\r\n\n"))
	f.Add([]byte(`{"user_id":"u","timestamp":1,"event":"e","p":{"a":[1]}}` + "\n" + `{"user_id":"u","timestamp":1,"event":"e",}`))
	f.Add([]byte("\ufeff" + `{"event":"e","user_id":"\ud800","timestamp":"2021-01-01"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), "f.ndjson", Options{})
		if err != nil {
			// Only a gzip magic with a truncated header fails here (the
			// reader sniffs .gz by content): an error, not a crash.
			if !strings.Contains(err.Error(), "gzip") {
				t.Fatal(err)
			}
			return
		}
		evs, errs := drain(t, r, false, bytes.Count(data, []byte("\n"))+2)
		lines := strings.Split(string(data), "\n")
		lineOf := func(n int64) string {
			l := strings.TrimSuffix(lines[n-1], "\r")
			if n == 1 {
				l = strings.TrimPrefix(l, "\ufeff")
			}
			return l
		}
		// Differential check against encoding/json: an accepted line is
		// valid JSON, and its strings decode the same.
		for n, es := range evs {
			line := lineOf(n)
			var obj map[string]any
			dec := json.NewDecoder(strings.NewReader(line))
			dec.UseNumber()
			if err := dec.Decode(&obj); err != nil || !json.Valid([]byte(line)) {
				t.Fatalf("line %d %q accepted, but encoding/json says %v", n, line, err)
			}
			ev := es[0]
			if s, ok := obj["user_id"].(string); ok && s != ev.UserID {
				t.Fatalf("user_id %q, encoding/json %q", ev.UserID, s)
			}
			if s := obj["event"].(string); s != ev.Name {
				t.Fatalf("event %q, encoding/json %q", ev.Name, s)
			}
			nested, _ := obj["properties"].(map[string]any)
			for _, p := range ev.Props {
				want, ok := obj[p.Name]
				if w, nok := nested[p.Name]; nok {
					want, ok = w, true
				}
				if !ok {
					t.Fatalf("property %q not in %q", p.Name, line)
				}
				if p.Value.Type == event.TypeString && want != p.Value.Str {
					t.Fatalf("property %q = %q, encoding/json %q", p.Name, p.Value.Str, want)
				}
			}
		}
		// A line rejected as invalid JSON is invalid for encoding/json too
		// (except for invalid UTF-8, which encoding/json replaces).
		for _, re := range errs {
			if strings.HasPrefix(re.Msg, "invalid JSON") && !strings.Contains(re.Msg, "UTF-8") && json.Valid([]byte(lineOf(re.Pos.Line))) {
				t.Fatalf("line %d %q: %v, but encoding/json accepts it", re.Pos.Line, lineOf(re.Pos.Line), re)
			}
		}
	})
}

func FuzzOTTO(f *testing.F) {
	f.Add([]byte(`{"session":0,"events":[{"aid":1517085,"ts":1659304800025,"type":"clicks"},{"aid":1,"ts":1659304800,"type":"carts"}]}` + "\n"))
	f.Add([]byte(`{"x":{"a":[1,{"b":null}]},"session":7,"events":[]}` + "\n" + `{"session":1,"events":[{"aid":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), "f.jsonl", Options{Format: FormatOTTO})
		if err != nil {
			// Only a gzip magic with a truncated header fails here (the
			// reader sniffs .gz by content): an error, not a crash.
			if !strings.Contains(err.Error(), "gzip") {
				t.Fatal(err)
			}
			return
		}
		evs, _ := drain(t, r, false, len(data)+2)
		for line, es := range evs {
			for _, e := range es {
				if e.UserID != es[0].UserID || e.Pos.Line != line || len(e.Props) != 1 || e.Props[0].Name != OTTOAidProp {
					t.Fatalf("line %d: event %+v", line, e)
				}
			}
		}
	})
}

func FuzzParquet(f *testing.F) {
	f.Add(writeParquet(f, []simpleRow{{"u1", 1619827200000, "view", 1}, {"u2", 1619913600000, "buy", 2}}))
	f.Add(writeParquet(f, []nullableRow{{User: ptr("u1"), Ts: ptr("2021-05-01"), Event: ptr("e"), P: ptr(1.5)}, {}}))
	f.Add(writeParquet(f, mixedRows(120, true), parquet.PageBufferSize(256), parquet.DictionaryMaxBytes(40)))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), "f.parquet", Options{Format: FormatParquet})
		if err != nil {
			return
		}
		drain(t, r, false, 1<<20)
		// Batch by batch, the reader reports the same rows and errors.
		sameBothWays(t, data, Options{})
	})
}

// FuzzGzipCSV: a gzip stream cut, flipped or limited anywhere fails with a
// *DecompressError positioned inside the compressed input, or reads the
// same rows as the plain input.
func FuzzGzipCSV(f *testing.F) {
	f.Add([]byte("user_id,timestamp,event\nu1,2021-05-01,view\nu2,2021-05-02,buy\n"), uint16(30), uint16(0), uint16(0))
	f.Add([]byte("user_id,timestamp,event\nu1,2021-05-01,view\n"), uint16(1000), uint16(12), uint16(20))
	f.Fuzz(func(t *testing.T, plain []byte, cut, flip, limit uint16) {
		body := gz(t, plain)
		if int(cut) < len(body) {
			body = body[:cut]
		}
		if flip > 0 && int(flip) < len(body) {
			body[flip] ^= 0x5a
		}
		opt := Options{MaxDecompressedBytes: int64(limit)}
		want, wantErrs := map[int64][]event.Event(nil), []*event.RowError(nil)
		if r, err := NewReader(bytes.NewReader(plain), "p.csv", Options{}); err == nil {
			want, wantErrs = drain(t, r, false, 1<<20)
		}
		r, err := NewReader(bytes.NewReader(body), "z.csv.gz", opt)
		var rows map[int64][]event.Event
		var rowErrs []*event.RowError
		if err == nil {
			rows, rowErrs = drain(t, r, false, 1<<20)
			r2, _ := NewReader(bytes.NewReader(body), "z.csv.gz", opt)
			_, err = readToEnd(r2)
		}
		var de *DecompressError
		if errors.As(err, &de) {
			if de.Offset < 0 || de.Offset > int64(len(body)) || !strings.HasPrefix(err.Error(), "z.csv.gz: gzip: ") {
				t.Fatalf("error %v: offset %d of %d", err, de.Offset, len(body))
			}
			if limit > 0 && errors.Is(err, ErrTooLarge) && de.Out > int64(limit) {
				t.Fatalf("decompressed %d bytes past the limit %d", de.Out, limit)
			}
			return
		}
		if err != nil && strings.Contains(err.Error(), "EOF") {
			t.Fatalf("a decompression failure reported as %v", err)
		}
		if err == nil && (int(cut) >= len(gz(t, plain))) && flip == 0 && (limit == 0 || int(limit) >= len(plain)) {
			if len(rows) != len(want) || len(rowErrs) != len(wantErrs) {
				t.Fatalf("gzip read %d rows %d errors, plain %d rows %d errors", len(rows), len(rowErrs), len(want), len(wantErrs))
			}
		}
	})
}
