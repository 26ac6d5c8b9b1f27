package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

// readToEnd reads r to the end and returns its row errors and its first
// fatal error (nil at EOF).
func readToEnd(r Reader) ([]*event.RowError, error) {
	defer r.Close()
	var ev event.Event
	var rows []*event.RowError
	for {
		err := r.Next(&ev)
		var re *event.RowError
		switch {
		case err == io.EOF:
			return rows, nil
		case errors.As(err, &re):
			rows = append(rows, re)
		case err != nil:
			return rows, err
		}
	}
}

// readGzip opens body as name and drains it.
func readGzip(t *testing.T, body []byte, name string, opt Options) error {
	t.Helper()
	r, err := NewReader(bytes.NewReader(body), name, opt)
	if err != nil {
		return err
	}
	_, err = readToEnd(r)
	return err
}

// TestGzipErrors: a truncated or corrupt gzip input is reported as such,
// with the file, the layer and the compressed byte offset, in every format
// and whether it fails in the header or in the rows.
func TestGzipErrors(t *testing.T) {
	var csvBody strings.Builder
	csvBody.WriteString("user_id,timestamp,event\n")
	for i := range 20000 {
		fmt.Fprintf(&csvBody, "u%d,2021-05-01 00:00:%02d,view%d\n", i, i%60, i%7)
	}
	var nd strings.Builder
	for i := range 20000 {
		fmt.Fprintf(&nd, `{"user_id":"u%d","timestamp":"2021-05-01","event":"view%d"}`+"\n", i, i%7)
	}
	inputs := []struct {
		name string
		body []byte
	}{
		{"x.csv.gz", gz(t, []byte(csvBody.String()))},
		{"x.ndjson.gz", gz(t, []byte(nd.String()))},
		{"x.parquet.gz", gz(t, writeParquet(t, []simpleRow{{"u1", 1619827200000, "view", 1}}))},
	}
	for _, in := range inputs {
		for _, cut := range []int{3, 12, 60, len(in.body) / 2, len(in.body) - 4} {
			err := readGzip(t, in.body[:cut], in.name, Options{})
			var de *DecompressError
			if !errors.As(err, &de) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%s cut at %d: error %v, want a truncated-stream *DecompressError", in.name, cut, err)
				continue
			}
			want := fmt.Sprintf("%s: gzip: truncated stream at compressed byte %d (", in.name, cut)
			if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "CSV") {
				t.Errorf("%s cut at %d: message %q, want it to begin %q", in.name, cut, err, want)
			}
		}
		// A flipped byte in the deflate data, or in the CRC trailer.
		for _, at := range []int{len(in.body) / 3, len(in.body) - 6} {
			bad := bytes.Clone(in.body)
			bad[at] ^= 0x55
			err := readGzip(t, bad, in.name, Options{})
			var de *DecompressError
			if !errors.As(err, &de) {
				// A flip may still decode to other valid bytes; the
				// checksum catches that at the end.
				t.Errorf("%s flipped at %d: error %v, want a *DecompressError", in.name, at, err)
				continue
			}
			if !strings.HasPrefix(err.Error(), in.name+": gzip: ") || de.Offset <= 0 || de.Offset > int64(len(bad)) {
				t.Errorf("%s flipped at %d: %v (offset %d of %d)", in.name, at, err, de.Offset, len(bad))
			}
		}
	}
}

// TestDecompressedLimit: a gzip bomb stops at the limit with ErrTooLarge;
// an input within it reads whole.
func TestDecompressedLimit(t *testing.T) {
	head := "user_id,timestamp,event,pad\n"
	row := "u1,2021-05-01," + "e," + strings.Repeat("x", 1000) + "\n"
	plain := head + strings.Repeat(row, 4096) // ~4 MiB, compresses ~300×
	body := gz(t, []byte(plain))
	err := readGzip(t, body, "bomb.csv.gz", Options{MaxDecompressedBytes: 1 << 20})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v, want ErrTooLarge", err)
	}
	if want := "bomb.csv.gz: gzip: decompresses to more than the limit of 1048576 bytes"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want it to begin %q", err, want)
	}
	if err := readGzip(t, body, "ok.csv.gz", Options{MaxDecompressedBytes: int64(len(plain))}); err != nil {
		t.Errorf("input of exactly the limit: %v", err)
	}
	// Parquet bodies are buffered whole: the limit bounds that buffer.
	pq := gz(t, writeParquet(t, []simpleRow{{"u1", 1619827200000, "view", 1}}))
	if _, err := NewReader(bytes.NewReader(pq), "p.parquet.gz", Options{MaxDecompressedBytes: 100}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("parquet over the limit: %v, want ErrTooLarge", err)
	}
}

// TestMaxPropertyBytes: a string value or insert id over the limit is a
// row error naming the row, the field and the limit, in every format and
// in both Parquet paths; the other rows are read.
func TestMaxPropertyBytes(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes
	opt := Options{MaxPropertyBytes: 64}
	wantMsg := "value is 80 bytes long, over the limit of 64 bytes per value"
	check := func(name string, rows []*event.RowError, field string, line int64) {
		t.Helper()
		if len(rows) != 1 || rows[0].Field != field || rows[0].Pos.Line != line || rows[0].Msg != wantMsg {
			t.Errorf("%s: row errors %v, want one at line %d field %q: %s", name, rows, line, field, wantMsg)
		}
	}
	csvIn := "user_id,timestamp,event,note,insert_id\nu1,2021-05-01,view,short,i1\nu2,2021-05-01,view," + long + ",i2\nu3,2021-05-01,view,ok," + long + "\n"
	rows, err := readToEnd(openString(t, csvIn, "p.csv", opt))
	if err != nil || len(rows) != 2 || rows[0].Field != "note" || rows[0].Pos.Line != 3 || rows[1].Field != "insert_id" || rows[1].Msg != wantMsg {
		t.Errorf("csv: %v, row errors %v", err, rows)
	}
	nd := `{"user_id":"u1","timestamp":"2021-05-01","event":"v","properties":{"note":"` + long + `"}}` + "\n" + `{"user_id":"u2","timestamp":"2021-05-01","event":"v","note":"ok"}` + "\n"
	rows, err = readToEnd(openString(t, nd, "p.ndjson", opt))
	if err != nil {
		t.Fatal(err)
	}
	check("ndjson", rows, "note", 1)
	// The default is 64 KiB; negative is no limit.
	big := strings.Repeat("a", event.DefaultMaxPropertyBytes+1)
	rows, _ = readToEnd(openString(t, "user_id,timestamp,event,note\nu1,2021-05-01,view,"+big+"\n", "d.csv", Options{}))
	if len(rows) != 1 || !strings.Contains(rows[0].Msg, "over the limit of 65536 bytes") {
		t.Errorf("default limit: %v", rows)
	}
	rows, _ = readToEnd(openString(t, "user_id,timestamp,event,note\nu1,2021-05-01,view,"+big+"\n", "d.csv", Options{MaxPropertyBytes: -1}))
	if len(rows) != 0 {
		t.Errorf("no limit: %v", rows)
	}
	// Parquet: Next and NextBatch agree.
	type noteRow struct {
		User  string  `parquet:"user_id"`
		Ts    int64   `parquet:"timestamp,timestamp(microsecond)"`
		Event string  `parquet:"event"`
		Note  *string `parquet:"note,optional"`
		Dict  string  `parquet:"kind,dict"`
	}
	prows := []noteRow{
		{"u1", 1, "v", ptr("short"), "a"}, {"u2", 2, "v", ptr(long), "b"}, {"u3", 3, "v", nil, long}, {"u4", 4, "v", nil, "c"},
	}
	body := writeParquet(t, prows)
	n, bad := sameBothWays(t, body, opt)
	if n != 2 || bad != 2 {
		t.Errorf("parquet: %d events, %d bad rows; want 2 and 2", n, bad)
	}
	rows, _ = readToEnd(parquetReaderOf(t, body, opt))
	if len(rows) != 2 || rows[0].Field != "note" || rows[0].Pos.Line != 2 || rows[1].Field != "kind" || rows[1].Pos.Line != 3 || rows[1].Msg != wantMsg {
		t.Errorf("parquet: row errors %v", rows)
	}
}
