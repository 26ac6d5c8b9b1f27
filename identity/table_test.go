package identity

import (
	"math/rand/v2"
	"testing"
)

func TestTable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tb table
	want := map[uint32]*Person{}
	var snaps []table
	var wants []map[uint32]*Person
	keys := []uint32{0, 1, 63, 64, 4095, 4096, 1<<24 - 1, 1 << 24, 1<<30 - 1, 1 << 30, 1<<32 - 1}
	for i := range 2000 {
		k := r.Uint32() >> r.IntN(32)
		if i < len(keys) {
			k = keys[i]
		}
		var p *Person
		if r.IntN(5) > 0 {
			p = &Person{Key: k}
		}
		tb.set(uint64(i/7+1), k, p)
		if p == nil {
			delete(want, k)
		} else {
			want[k] = p
		}
		if i%7 == 6 {
			snaps = append(snaps, tb)
			c := make(map[uint32]*Person, len(want))
			for k, p := range want {
				c[k] = p
			}
			wants = append(wants, c)
		}
	}
	for i, s := range snaps {
		n := 0
		s.each(func(p *Person) bool {
			n++
			if wants[i][p.Key] != p {
				t.Fatalf("snapshot %d: key %d holds %p", i, p.Key, p)
			}
			return true
		})
		if n != len(wants[i]) {
			t.Fatalf("snapshot %d: %d persons, want %d", i, n, len(wants[i]))
		}
		for k, p := range wants[i] {
			if s.get(k) != p {
				t.Fatalf("snapshot %d: get(%d) = %p, want %p", i, k, s.get(k), p)
			}
		}
		if _, ok := wants[i][12345]; !ok && s.get(12345) != nil {
			t.Fatalf("snapshot %d: get of a missing key", i)
		}
	}
}

func TestNoopKeepsSnapshot(t *testing.T) {
	g := New()
	if err := g.Apply([]Op{id("u", "a")}, nil); err != nil {
		t.Fatal(err)
	}
	s := g.Snapshot()
	if err := g.Apply([]Op{id("u", "a"), merge("a", "u"), id("a", "a")}, nil); err != nil {
		t.Fatal(err)
	}
	if g.Snapshot() != s {
		t.Error("Noops published a new snapshot")
	}
}
