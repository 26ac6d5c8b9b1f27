package ingest

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
)

func TestDetectFormat(t *testing.T) {
	tests := map[string]Format{
		"a.csv": FormatCSV, "dir.x/A.CSV.GZ": FormatCSV, "e.ndjson": FormatNDJSON, "e.jsonl.gz": FormatNDJSON,
		"e.json": FormatNDJSON, "p.parquet": FormatParquet, "p.parquet.gz": FormatParquet,
	}
	for name, want := range tests {
		if got, err := DetectFormat(name); err != nil || got != want {
			t.Errorf("DetectFormat(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for _, name := range []string{"-", "a.txt", "a.gz", "csv"} {
		if _, err := DetectFormat(name); err == nil {
			t.Errorf("DetectFormat(%q): no error", name)
		}
	}
	for in, want := range map[string]Format{"CSV": FormatCSV, "jsonl": FormatNDJSON, "otto": FormatOTTO, "parquet": FormatParquet} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Errorf("ParseFormat(xml): no error")
	}
}

func TestOptionErrors(t *testing.T) {
	bad := []Options{
		{UserCol: "a", TimeCol: "a"},
		{Schema: map[string]event.Type{"x": event.TypeNone}},
		{Schema: map[string]event.Type{"": event.TypeInt}},
		{Format: "xml"},
	}
	for _, o := range bad {
		if _, err := NewReader(strings.NewReader("user_id,timestamp,event\n"), "o.csv", o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
	// Format names are normalised.
	for _, f := range []Format{"CSV", "Csv"} {
		if _, err := NewReader(strings.NewReader("user_id,timestamp,event\n"), "-", Options{Format: f}); err != nil {
			t.Errorf("format %q: %v", f, err)
		}
	}
	if r, err := NewReader(strings.NewReader(""), "-", Options{Format: "jsonl"}); err != nil || r == nil {
		t.Errorf("format jsonl: %v", err)
	}
	// In a users file the event column name is free for a property.
	if _, err := NewReader(strings.NewReader("user_id\n"), "o.csv", Options{Users: true, EventCol: "user_id"}); err != nil {
		t.Errorf("users file: %v", err)
	}
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGzipAllFormats reads the same events from plain and gzipped input in
// every format, by file (Open, name ends in .gz) and by stream (NewReader,
// detected from the magic bytes).
func TestGzipAllFormats(t *testing.T) {
	dir := t.TempDir()
	inputs := map[Format][]byte{
		FormatCSV:     []byte("user_id,timestamp,event,n\nu1,2021-05-01,view,1\nu2,2021-05-02,buy,2\n"),
		FormatNDJSON:  []byte(`{"user_id":"u1","timestamp":"2021-05-01","event":"view","n":1}` + "\n" + `{"user_id":"u2","timestamp":"2021-05-02","event":"buy","n":2}` + "\n"),
		FormatOTTO:    []byte(`{"session":1,"events":[{"aid":1,"ts":1619827200000,"type":"view"},{"aid":2,"ts":1619913600000,"type":"buy"}]}` + "\n"),
		FormatParquet: writeParquet(t, []simpleRow{{"u1", 1619827200000, "view", 1}, {"u2", 1619913600000, "buy", 2}}),
	}
	for format, plain := range inputs {
		ext := map[Format]string{FormatCSV: ".csv", FormatNDJSON: ".ndjson", FormatOTTO: ".jsonl", FormatParquet: ".parquet"}[format]
		opt := Options{}
		if format == FormatOTTO {
			opt.Format = FormatOTTO
		}
		for _, zip := range []bool{false, true} {
			body, name := plain, "in"+ext
			if zip {
				body, name = gz(t, plain), name+".gz"
			}
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, body, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := Open(path, opt)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			p := r.(Progresser)
			if p.Size() != int64(len(body)) {
				t.Errorf("%s: Size = %d, want %d", name, p.Size(), len(body))
			}
			evs, errs := readAll(t, r)
			if read := p.BytesRead(); read < int64(len(body)) && format != FormatParquet {
				t.Errorf("%s: BytesRead = %d at EOF, want %d", name, read, len(body))
			}
			if read := p.BytesRead(); read == 0 || read > int64(len(body))*2 {
				t.Errorf("%s: BytesRead = %d for %d bytes", name, read, len(body))
			}
			checkTwo(t, name, evs, errs, format == FormatOTTO)

			sopt := opt
			sopt.Format = format
			sr, err := NewReader(bytes.NewReader(body), "-", sopt)
			if err != nil {
				t.Fatalf("%s as a stream: %v", name, err)
			}
			if sr.(Progresser).Size() != -1 {
				t.Errorf("stream size known")
			}
			evs, errs = readAll(t, sr)
			checkTwo(t, name+" (stream)", evs, errs, format == FormatOTTO)
		}
	}
}

func checkTwo(t *testing.T, name string, evs []event.Event, errs []*event.RowError, otto bool) {
	t.Helper()
	if len(errs) != 0 || len(evs) != 2 {
		t.Fatalf("%s: %d events, errors %v", name, len(evs), errs)
	}
	want := []struct {
		user, name string
		us         int64
		n          int64
	}{{"u1", "view", 1619827200e6, 1}, {"u2", "buy", 1619913600e6, 2}}
	prop := "n"
	if otto {
		want[0].user, want[1].user, prop = "1", "1", OTTOAidProp
	}
	for i, w := range want {
		e := evs[i]
		if e.UserID != w.user || e.Name != w.name || e.Time != w.us || len(e.Props) != 1 || e.Props[0] != (event.Prop{Name: prop, Value: event.Int(w.n)}) {
			t.Errorf("%s: event %d = %+v", name, i, e)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "missing.csv"), Options{}); err == nil || !strings.Contains(err.Error(), "missing.csv") {
		t.Errorf("missing file: %v", err)
	}
	path := filepath.Join(t.TempDir(), "bad.csv.gz")
	if err := os.WriteFile(path, []byte{0x1f, 0x8b, 1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "bad.csv.gz") {
		t.Errorf("corrupt gzip: %v", err)
	}
	// A truncated gzip stream is a fatal error, not a row error.
	full := gz(t, []byte(strings.Repeat("u,1,e\n", 10000)))
	r, err := NewReader(bytes.NewReader(full[:len(full)/2]), "t.csv.gz", Options{UserCol: "u", TimeCol: "1", EventCol: "e"})
	if err == nil {
		var ev event.Event
		for err == nil {
			err = r.Next(&ev)
		}
		r.Close()
	}
	if err == nil || strings.Contains(err.Error(), "EOF") && !strings.Contains(err.Error(), "unexpected") {
		t.Errorf("truncated gzip: %v", err)
	}
}

// The real bundled datasets: excerpts in testdata always, the full files
// when the repository's data directory is present.
func TestRealDatasets(t *testing.T) {
	importTime := time.Date(2022, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	cardano := Options{UserCol: "user_id", TimeCol: "event_time", EventCol: "event_type"}
	tests := []struct {
		path   string
		opt    Options
		rows   int
		counts map[string]int
		full   bool
	}{
		{"testdata/cardano_events.csv.gz", cardano, 300, map[string]int{"badge": 138, "signup": 136, "question": 11, "answer": 10, "comment": 4, "vote_favorite": 1}, false},
		{"testdata/cardano_users.csv.gz", Options{Users: true, ImportTime: importTime}, 100, nil, false},
		{"testdata/otto_events.csv", Options{TimeCol: "ts_ms", EventCol: "event_type"}, 100, map[string]int{"clicks": 95, "carts": 3, "orders": 2}, false},
		{"../data/stackexchange-cardano/events.csv.gz", cardano, 13206, map[string]int{"badge": 4467, "signup": 3987, "comment": 1827, "answer": 1496, "question": 1040, "vote_favorite": 291, "tag_wiki": 43, "tag_wiki_excerpt": 43, "moderator_nomination": 6, "bounty_start": 6}, true},
		{"../data/stackexchange-cardano/users.csv.gz", Options{Users: true, ImportTime: importTime}, 3988, nil, true},
		{"../data/otto-sample/train.jsonl", Options{Format: FormatOTTO}, 862, map[string]int{"clicks": 800, "carts": 52, "orders": 10}, true},
		{"../data/otto-sample/events.csv", Options{TimeCol: "ts_ms", EventCol: "event_type"}, 862, map[string]int{"clicks": 800, "carts": 52, "orders": 10}, true},
	}
	for _, tc := range tests {
		if _, err := os.Stat(tc.path); tc.full && err != nil {
			t.Logf("skipping %s: %v", tc.path, err)
			continue
		}
		r, err := Open(tc.path, tc.opt)
		if err != nil {
			t.Fatal(err)
		}
		evs, errs := readAll(t, r)
		if len(errs) != 0 || len(evs) != tc.rows {
			t.Errorf("%s: %d rows, %d errors (%v), want %d rows", tc.path, len(evs), len(errs), errs, tc.rows)
			continue
		}
		if tc.counts != nil {
			got := map[string]int{}
			for _, e := range evs {
				got[e.Name]++
			}
			for k, v := range tc.counts {
				if got[k] != v {
					t.Errorf("%s: %d %q events, want %d", tc.path, got[k], k, v)
				}
			}
		}
		// Every event passes the spec limits.
		for _, e := range evs {
			check := event.ValidateEvent
			if tc.opt.Users {
				check = event.ValidateUser
			}
			if err := check(&e); err != nil {
				t.Fatalf("%s: %v", tc.path, err)
			}
		}
	}
	// Spot checks on the excerpts.
	r, err := Open("testdata/cardano_events.csv.gz", cardano)
	if err != nil {
		t.Fatal(err)
	}
	types := r.(Typed).PropTypes()
	evs, _ := readAll(t, r)
	wantTypes := []event.PropType{{Name: "object_id", Type: event.TypeInt}, {Name: "value", Type: event.TypeInt}, {Name: "detail", Type: event.TypeString}}
	if len(types) != 3 || types[0] != wantTypes[0] || types[1] != wantTypes[1] || types[2] != wantTypes[2] {
		t.Errorf("cardano types = %v", types)
	}
	// 2021-04-27T00:00:00.000Z,180,vote_favorite,44,,
	if e := evs[0]; e.UserID != "180" || e.Name != "vote_favorite" || e.Time != micros(t, "2021-04-27T00:00:00Z") || e.Pos.Line != 2 ||
		len(e.Props) != 1 || e.Props[0] != (event.Prop{Name: "object_id", Value: event.Int(44)}) {
		t.Errorf("cardano first event = %+v", e)
	}
	r, err = Open("testdata/cardano_users.csv.gz", Options{Users: true, ImportTime: importTime})
	if err != nil {
		t.Fatal(err)
	}
	users, _ := readAll(t, r)
	// -1,2018-02-20T21:07:06.207Z,2018-02-20T21:07:06.207Z,1,8,0,26
	if u := users[0]; u.UserID != "-1" || u.Time != importTime || prop(u, "signup_time") != event.Time(micros(t, "2018-02-20T21:07:06.207Z")) ||
		prop(u, "reputation") != event.Int(1) || prop(u, "down_votes") != event.Int(26) {
		t.Errorf("cardano first user = %+v", u)
	}
}

// BytesRead may be polled by a progress bar while another goroutine reads.
func TestProgressConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.csv.gz")
	body := gz(t, []byte("user_id,timestamp,event\n"+strings.Repeat("u,2021-05-01T10:00:00Z,e\n", 50000)))
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := r.(Progresser)
	done := make(chan struct{})
	polled := make(chan int64)
	go func() {
		var last int64
		for {
			select {
			case <-done:
				polled <- last
				return
			default:
				n := p.BytesRead()
				if n < last {
					t.Errorf("BytesRead went back from %d to %d", last, n)
				}
				last = n
			}
		}
	}()
	evs, errs := readAll(t, r)
	close(done)
	<-polled
	if len(evs) != 50000 || len(errs) != 0 || p.BytesRead() != int64(len(body)) {
		t.Errorf("%d events, %v, read %d of %d", len(evs), errs, p.BytesRead(), len(body))
	}
}
