package gen

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"math"
	"testing"

	"github.com/spurdb/spur/event"
)

// goldenConfigs are the data sets whose output is pinned by TestGolden.
var goldenConfigs = []Config{
	{Events: 200_000, Seed: 1},
	{Events: 50_000, Seed: 7, Days: 30},
	{Events: 30_000, Seed: -3, Users: 9000, Start: DefaultStart + 12_345_678_000},
	{Events: 20_000, Seed: 42, Users: 20_000}, // installs only
	{Events: 5_000, Seed: 5, Users: 3},        // a few very heavy users
}

// goldenEvents is how many events of each golden config are hashed.
const goldenEvents = 100_000

// writeValue writes a property value to h in a fixed binary form.
func writeValue(h hash.Hash, v event.Value) {
	var b [8]byte
	h.Write([]byte{byte(v.Type)})
	binary.LittleEndian.PutUint64(b[:], uint64(v.Int))
	h.Write(b[:])
	binary.LittleEndian.PutUint64(b[:], math.Float64bits(v.Float))
	h.Write(b[:])
	h.Write([]byte(v.Str))
	h.Write([]byte{0})
}

// writeInt writes x to h as 8 little-endian bytes.
func writeInt(h hash.Hash, x int64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(x))
	h.Write(b[:])
}

// nextHash hashes the first n events Next yields for cfg (SHA-256, hex).
func nextHash(t *testing.T, cfg Config, n int) string {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var ev event.Event
	for k := 0; k < n && g.Next(&ev); k++ {
		h.Write([]byte(ev.UserID))
		h.Write([]byte{0})
		writeInt(h, ev.Time)
		h.Write([]byte(ev.Name))
		h.Write([]byte{0})
		h.Write([]byte(ev.InsertID))
		h.Write([]byte{byte(len(ev.Props))})
		for _, p := range ev.Props {
			h.Write([]byte(p.Name))
			h.Write([]byte{0})
			writeValue(h, p.Value)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// batchHash hashes the first n rows NextBatch yields for cfg: every
// column's name, type, dictionary value and null flag per row.
func batchHash(t *testing.T, cfg Config, n int) string {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var b event.Batch
	done := 0
	for done < n {
		err := Source{G: g}.NextBatch(&b)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		cols := append([]*event.Column{b.User, b.Event}, b.Props...)
		for i := 0; i < b.Rows && done < n; i++ {
			writeInt(h, b.Time[i])
			for _, c := range cols {
				h.Write([]byte(c.Name))
				h.Write([]byte{0, byte(c.Type)})
				if c.Null[i] {
					h.Write([]byte{1})
					continue
				}
				h.Write([]byte{0})
				v := event.Value{Type: c.Type}
				switch {
				case c.Dict != nil:
					v.Str = c.Dict.Strs[c.Codes[i]]
				case c.Type == event.TypeString:
					v.Str = c.Strs[i]
				case c.Type == event.TypeFloat:
					v.Float = c.Floats[i]
				default:
					v.Int = c.Ints[i]
				}
				writeValue(h, v)
			}
			done++
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// usersHash hashes every user row of cfg's UserStream.
func usersHash(t *testing.T, cfg Config) string {
	t.Helper()
	s, err := NewUserStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var ev event.Event
	for s.Next(&ev) {
		h.Write([]byte(ev.UserID))
		h.Write([]byte{0})
		writeInt(h, ev.Time)
		for _, p := range ev.Props {
			h.Write([]byte(p.Name))
			h.Write([]byte{0})
			writeValue(h, p.Value)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// parquetHash hashes the bytes of WriteParquet's file for cfg (a change of
// the parquet-go version may change them; then recompute on the old
// generator before changing it).
func parquetHash(t *testing.T, cfg Config) string {
	t.Helper()
	h := sha256.New()
	if err := WriteParquet(h, cfg, nil); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestGolden pins the generator's output as it was before persons
// (issue 27) so that data sets, and the benchmarks on them, stay
// comparable: the first goldenEvents events of each goldenConfigs entry,
// by Next and by NextBatch, the users, and the Parquet bytes of the first
// config, must hash as recorded. The values were computed on the code of
// commit f820984 (before Config.Persons existed); never update them to
// make a change pass.
func TestGolden(t *testing.T) {
	want := []struct{ next, batch, users string }{
		{"79724d6914cb0eedee0b0fc04aa01121848ebdfbf541c80a5ecbb4583f5332f4", "29a84a07d87983a38387ad88349462141deaaa00180b1caff485604be4bbfdc0", "765d752b8360e74fbd6488b9f88bb3480f1e3fc2c57da6db23dd5bef2336275f"},
		{"6fcf9caad587ee1a10157d9dadbc88a0df9db6c745a7dcbbccbe1b8f0fa39643", "c1c549b64d3f83a3edfeac61902aedb87f8de41677cef64a1d70d24314f864d0", "8b95cf6203b57f6b0cbdf5a9c4f3542262d92496acefbd29fea8cdf02c2cb463"},
		{"77edc6e90de98172af7bb1d4952c4e206b78d45789e489f6ba5758f1a75becb1", "5df6c4a168a3e443abdbbfbb6a636c1f1ada8af365b8b30387fa2015d4cbe8c7", "46a9dc74851dac44dcfb13fd379326d45e0168d259056a0eec8a96920bd5c4c5"},
		{"b2025aff9a2727b76fdb1a7acf215e15712be83c3cd47a95bd16110889cc2713", "99cfa02322399a43257a688cac20e80254ea7b5f36af48070283e188b08fd1c0", "c1c9ec94032efc024a8bc0448911ba1d93d493d0b44638649914bd1ceb88d5b8"},
		{"3a8ac535a738587e7e8e6c88277b148e9ebfcfd0a129d9fef40fb5d3834bec4c", "af6f07114f01ba93aac8f14c60beed488102058793d106c4e61345b8aca59256", "99487ed49c0d5adb68638a2ed51f255fda93f14985cab7b514e8505d3ebed36a"},
	}
	const wantParquet = "5af7e3c387b219f5705cd544c0d766decd3d7f7a15c0c06fd9922ea36b75ecde"
	for i, cfg := range goldenConfigs {
		next, batch, users := nextHash(t, cfg, goldenEvents), batchHash(t, cfg, goldenEvents), usersHash(t, cfg)
		if next != want[i].next || batch != want[i].batch || users != want[i].users {
			t.Errorf("config %d %+v: hashes (next, batch, users) = %s %s %s, want %s %s %s",
				i, cfg, next, batch, users, want[i].next, want[i].batch, want[i].users)
		}
	}
	if got := parquetHash(t, goldenConfigs[0]); got != wantParquet {
		t.Errorf("parquet of %+v hashes %s, want %s", goldenConfigs[0], got, wantParquet)
	}
}
