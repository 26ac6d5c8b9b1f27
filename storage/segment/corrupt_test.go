package segment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spurdb/spur/event"
)

// TestCorruptionEveryByte flips every byte of a small multi-block segment
// with several masks and requires Open or Verify to report an error
// matching ErrCorruption that names the file. ReadBlock must also fail (or
// succeed only for blocks whose chunks the flip did not touch) without
// panicking.
func TestCorruptionEveryByte(t *testing.T) {
	in := realisticInput(5, 300)
	// The three realistic columns plus an int column.
	in.Props = append(in.Props, PropColumn{Name: "n", Type: event.TypeInt, Present: allPresent(len(in.Times)), Ints: make([]int64, len(in.Times))})
	for r := range in.Props[3].Ints {
		in.Props[3].Ints[r] = int64(r * r)
	}
	path := filepath.Join(t.TempDir(), "seg")
	if _, err := Write(path, in, WriterOptions{BlockRows: 64, MinZstdRatio: 1.01}); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := openSeg(t, path)
	nBlocks := len(r.Meta().Blocks)
	if nBlocks < 4 {
		t.Fatalf("want a multi-block segment, got %d blocks", nBlocks)
	}
	compressed := compressedChunks(r)
	if compressed == 0 {
		t.Fatal("no compressed chunk: the test would not cover zstd frames")
	}
	r.Close()
	t.Logf("%d bytes, %d blocks, %d compressed chunks", len(orig), nBlocks, compressed)

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := []int{0, 1, 2, 3}
	var b Block
	for off := range orig {
		for _, mask := range []byte{0x01, 0x80, 0xff, 0x5a} {
			if _, err := f.WriteAt([]byte{orig[off] ^ mask}, int64(off)); err != nil {
				t.Fatal(err)
			}
			err := openAndVerify(path, func(r *Reader) {
				for i := range r.Meta().Blocks {
					r.ReadBlock(i, all, &b) // must not panic
				}
			})
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), path) {
				t.Fatalf("byte %d ^ %#02x: %v, want a corruption error naming the file", off, mask, err)
			}
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Path != path || ce.Offset < 0 || ce.Offset > int64(len(orig)) {
				t.Fatalf("byte %d ^ %#02x: %#v, want a *CorruptionError with path and offset", off, mask, err)
			}
		}
		if _, err := f.WriteAt(orig[off:off+1], int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := openAndVerify(path, nil); err != nil {
		t.Fatalf("restored file: %v", err)
	}
}

// openAndVerify opens path, runs use (if any) and Verify, and returns the
// first error.
func openAndVerify(path string, use func(*Reader)) error {
	r, err := Open(path)
	if err != nil {
		return err
	}
	defer r.Close()
	if use != nil {
		use(r)
	}
	return r.Verify()
}

// TestReadBlockDetectsCorruption checks that ReadBlock itself (not only
// Verify) reports a damaged chunk it reads, and that Verify notices a file
// changed after Open.
func TestReadBlockDetectsCorruption(t *testing.T) {
	in := realisticInput(6, 2000)
	path := mustWrite(t, in, WriterOptions{BlockRows: 500})
	r := openSeg(t, path)
	c := r.layouts[1].chunks[colTimes]
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var one [1]byte
	f.ReadAt(one[:], c.off+int64(c.stored)/2)
	one[0] ^= 0x10
	f.WriteAt(one[:], c.off+int64(c.stored)/2)
	var b Block
	if err := r.ReadBlock(0, nil, &b); err != nil {
		t.Fatalf("undamaged block 0: %v", err)
	}
	err = r.ReadBlock(1, nil, &b)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.Offset != c.off || !strings.Contains(ce.Msg, `"$time"`) || !strings.Contains(ce.Msg, "checksum") {
		t.Fatalf("ReadBlock of a damaged times chunk: %v, want a checksum error at offset %d", err, c.off)
	}
	if err := r.Verify(); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Verify: %v", err)
	}
	one[0] ^= 0x10
	f.WriteAt(one[:], c.off+int64(c.stored)/2)
	if err := r.Verify(); err != nil {
		t.Fatalf("Verify after repair: %v", err)
	}
	if _, err := f.Seek(0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{0}); err != nil { // the file grew since Open
		t.Fatal(err)
	}
	if err := r.Verify(); !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "changed") {
		t.Fatalf("Verify of a grown file: %v", err)
	}
}
