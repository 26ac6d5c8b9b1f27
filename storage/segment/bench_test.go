package segment

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/spurdb/spur/internal/cputime"
)

// benchRows is the size of the realistic benchmark segment.
const benchRows = 1 << 20

var benchInput = sync.OnceValue(func() *Input { return realisticInput(7, benchRows) })

// BenchmarkReadBlock decodes the blocks of a realistic 1M-event segment
// (see realisticShape) round-robin from warm page cache into one reused
// Block: times+events only, and with all three property columns; for the
// default writer options and for MinZstdRatio 1.07 (zstd wherever it saves
// 1/16: smaller, slower). rows/s is decoded rows per wall-clock second on
// one goroutine, rows/cpu-s per second of process CPU time (the per-core
// speed even when other processes share the machine).
func BenchmarkReadBlock(b *testing.B) {
	in := benchInput()
	// default and zstd1.07 write what the writer chooses (here the times'
	// exception bitmap); gaps-only writes version 1's exception gaps, which
	// readers still meet.
	for _, opt := range []struct {
		name string
		opt  WriterOptions
	}{{"default", WriterOptions{}}, {"zstd1.07", WriterOptions{MinZstdRatio: 1.07}}, {"gaps-only", WriterOptions{pforBitmapRatio: -1}}} {
		path := filepath.Join(b.TempDir(), "seg")
		if _, err := Write(path, in, opt.opt); err != nil {
			b.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		for _, bc := range []struct {
			name  string
			props []int
		}{{"times+events", nil}, {"all-props", []int{0, 1, 2}}} {
			b.Run(opt.name+"/"+bc.name, func(b *testing.B) { benchReadBlock(b, r, bc.props) })
		}
	}
}

func benchReadBlock(b *testing.B, r *Reader, props []int) {
	var blk Block
	n := len(r.Meta().Blocks)
	for i := range n { // grow blk's buffers: measure the steady state
		if err := r.ReadBlock(i, props, &blk); err != nil {
			b.Fatal(err)
		}
	}
	rows, read := 0, int64(0)
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for i := 0; b.Loop(); i++ {
		if err := r.ReadBlock(i%n, props, &blk); err != nil {
			b.Fatal(err)
		}
		rows += blk.Rows
		read += blk.BytesRead
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(rows)/cpu.Seconds(), "rows/cpu-s")
	}
	b.ReportMetric(float64(read)/float64(rows), "stored-bytes/row")
}

// BenchmarkWrite writes the realistic 1M-event segment; bytes/event is the
// file size over the rows, rows/cpu-s the rows per second of process CPU
// time (the per-core speed even when other processes share the machine).
func BenchmarkWrite(b *testing.B) {
	in := benchInput()
	dir := b.TempDir()
	var info Info
	b.ReportAllocs()
	cpu0 := cputime.Process()
	for i := 0; b.Loop(); i++ {
		var err error
		if info, err = Write(filepath.Join(dir, fmt.Sprint(i)), in, WriterOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(int64(b.N)*info.Rows)/b.Elapsed().Seconds(), "rows/s")
	if cpu := cputime.Process() - cpu0; cpu > 0 {
		b.ReportMetric(float64(int64(b.N)*info.Rows)/cpu.Seconds(), "rows/cpu-s")
	}
	b.ReportMetric(float64(info.Bytes)/float64(info.Rows), "bytes/event")
}

// TestColumnReport logs the per-column storage of the realistic segment
// (run with -v), the figures spur inspect shows.
func TestColumnReport(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 1M-event segment")
	}
	in := benchInput()
	path, info := writeSeg(t, in, WriterOptions{})
	r := openSeg(t, path)
	t.Logf("shape: %s", realisticShape)
	t.Logf("%d events, %d users, %d blocks, %d bytes: %.3f bytes/event", info.Rows, info.Users, len(r.Meta().Blocks), info.Bytes, float64(info.Bytes)/float64(info.Rows))
	for _, c := range r.Meta().Columns {
		t.Logf("%-10s %8d stored %8d raw  %.3f B/event  %s", c.Name, c.CompressedBytes, c.RawBytes, float64(c.CompressedBytes)/float64(info.Rows), c.Encoding)
	}
	if bpe := float64(info.Bytes) / float64(info.Rows); bpe > 4 {
		t.Errorf("%.2f bytes/event, over the 4 bytes/event target", bpe)
	}
	_, small := writeSeg(t, in, WriterOptions{MinZstdRatio: 1.07})
	t.Logf("with MinZstdRatio 1.07 (compress whenever it saves 1/16): %d bytes, %.3f bytes/event", small.Bytes, float64(small.Bytes)/float64(small.Rows))
}

// BenchmarkDecodeUsers decodes the users chunk of a 64 Ki-row block of
// 2,700 users with ids of 8 bytes ("u0000000", as at 100M events), at each
// Keys: the row counts alone, with the ids, and with the hashes computed.
func BenchmarkDecodeUsers(b *testing.B) {
	const users = 2700
	in := make([]User, users)
	rows := 0
	for i := range in {
		id := fmt.Sprintf("u%07d", i*1543)
		in[i] = User{Hash: UserHash([]byte(id)), ID: id, Rows: 1 + (i*7919)%48}
		rows += in[i].Rows
	}
	slices.SortFunc(in, func(a, b User) int { return cmp.Compare(a.Hash, b.Hash) })
	var e encoder
	raw, enc := e.encodeUsers(nil, usersBlock(in), 1e9)
	for _, keys := range []Keys{KeysNone, KeysIDs, KeysAll} {
		b.Run([]string{"none", "ids", "all"}[keys], func(b *testing.B) {
			var blk Block
			b.ReportAllocs()
			for b.Loop() {
				if err := decodeUsers(enc, raw, rows, users, in[0].Hash, in[users-1].Hash, &blk, keys); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*users), "ns/user")
		})
	}
}

// BenchmarkDecodeFooter decodes the footer of the realistic 1M-event
// segment (Open's work once the bytes are read): the dictionaries, block
// and chunk records, checked.
func BenchmarkDecodeFooter(b *testing.B) {
	path := filepath.Join(b.TempDir(), "seg")
	if _, err := Write(path, benchInput(), WriterOptions{}); err != nil {
		b.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	footer := data[r.footer : len(data)-trailerSize]
	b.SetBytes(int64(len(footer)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := decodeFooter(footer, r.footer, r.meta.Version); err != nil {
			b.Fatal(err)
		}
	}
}

// discardFile is a File that keeps nothing, for the writer benchmarks.
type discardFile struct{ n int64 }

func (f *discardFile) Write(p []byte) (int, error) { f.n += int64(len(p)); return len(p), nil }
func (f *discardFile) Sync() error                 { return nil }
func (f *discardFile) Close() error                { return nil }

// BenchmarkWriteStream writes the realistic 1M-event segment with a
// Writer to a file that discards the bytes, as the two writers of storage
// feed it: "import" appends it in Inputs of 64 Ki rows (an import run's
// sorted buffer, users cut between pieces), "compact" appends the rows of
// its decoded blocks user by user through a Remap (a compaction of one
// input). rows/cpu-s is rows per second of process CPU time.
func BenchmarkWriteStream(b *testing.B) {
	in := benchInput()
	props := make([]PropSpec, len(in.Props))
	for j, p := range in.Props {
		props[j] = PropSpec{Name: p.Name, Type: p.Type}
	}
	opt := WriterOptions{Props: props, Identity: Identity{Kind: KindEvents, Shards: 16, Shard: 3}}
	run := func(b *testing.B, fill func(w *Writer) error) {
		b.ReportAllocs()
		var info Info
		cpu0 := cputime.Process()
		for b.Loop() {
			w, err := NewWriter(&discardFile{}, opt)
			if err == nil {
				err = fill(w)
			}
			if err == nil {
				info, err = w.Close()
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(int64(b.N)*info.Rows)/b.Elapsed().Seconds(), "rows/s")
		if cpu := cputime.Process() - cpu0; cpu > 0 {
			b.ReportMetric(float64(int64(b.N)*info.Rows)/cpu.Seconds(), "rows/cpu-s")
		}
	}
	b.Run("import", func(b *testing.B) {
		var pieces []*Input
		for lo := 0; lo < len(in.Times); lo += 1 << 16 {
			pieces = append(pieces, sliceInput(in, lo, min(lo+1<<16, len(in.Times))))
		}
		run(b, func(w *Writer) error {
			for _, p := range pieces {
				if err := w.AppendInput(p); err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("compact", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "seg")
		if _, err := Write(path, in, WriterOptions{}); err != nil {
			b.Fatal(err)
		}
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		all := []int{0, 1, 2}
		blocks := make([]Block, len(r.Meta().Blocks))
		for i := range blocks {
			if err := r.ReadBlock(i, all, &blocks[i]); err != nil {
				b.Fatal(err)
			}
		}
		run(b, func(w *Writer) error {
			rm, err := w.NewRemap(r.Meta(), all)
			if err != nil {
				return err
			}
			for i := range blocks {
				blk := &blocks[i]
				for u := range len(blk.UserHashes) {
					if err := w.StartUser(blk.UserHashes[u], blk.UserID(u)); err != nil {
						return err
					}
					if err := w.AppendBlockRows(blk, int(blk.UserStarts[u]), int(blk.UserStarts[u+1]), rm); err != nil {
						return err
					}
				}
			}
			return nil
		})
	})
}
