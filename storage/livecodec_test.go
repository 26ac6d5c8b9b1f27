package storage

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/userfold"
)

// liveRecordSample returns n events over users u0..u(n/3) with the four
// property types the log stores (string, float, int, bool; time as int),
// and a user write (once or not) for every fourth event.
func liveRecordSample(n int, seed uint64) ([]event.Event, []UserWrite) {
	r := rand.New(rand.NewPCG(seed, 7))
	evs := make([]event.Event, n)
	var users []UserWrite
	for i := range evs {
		evs[i] = event.Event{UserID: fmt.Sprintf("user%d", r.IntN(n/3+1)), Name: names[r.IntN(len(names))],
			Time: 1_700_000_000_000_000 + int64(i)*1000 - r.Int64N(1<<40), InsertID: fmt.Sprintf("%016x", r.Uint64()),
			Props: []event.Prop{{Name: "url", Value: event.String(fmt.Sprintf("/p/%d", r.IntN(500)))},
				{Name: "price", Value: event.Float(float64(r.IntN(10000)) / 100)},
				{Name: "qty", Value: event.Int(int64(r.IntN(5)) - 2)},
				{Name: "paid", Value: event.Value{Type: event.TypeBool, Int: int64(r.IntN(2))}},
				{Name: "at", Value: event.Value{Type: event.TypeTime, Int: r.Int64()}}}}
		if i%4 == 0 {
			users = append(users, UserWrite{Index: i, Once: i%8 == 0,
				Props: []event.Prop{{Name: "tier", Value: event.String("gold")}, {Name: "score", Value: event.Float(math.Pi)}}})
		}
	}
	return evs, users
}

// TestLiveRecordRoundTrip: a record decodes to the events and user
// writes it was encoded from, into a reused batch too; every truncation
// and every appended byte is an error wrapping errLiveRecord.
func TestLiveRecordRoundTrip(t *testing.T) {
	var lb liveBatch
	for seed := range uint64(20) {
		n := int(seed*7) % 40
		evs, users := liveRecordSample(n, seed)
		if seed%2 == 1 { // every operation (version 3)
			for k := range users {
				users[k].Op, users[k].Once = UserOp(k%int(userfold.NumOps)), false
			}
		}
		rec := appendLiveRecord(nil, evs, users, nil)
		wantV := byte(2)
		for k := range users {
			if !users[k].op().Simple() {
				wantV = 3
			}
		}
		if rec[0] != wantV {
			t.Fatalf("seed %d: record version %d, want %d", seed, rec[0], wantV)
		}
		if err := decodeLiveRecord(rec, &lb); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(lb.evs) != len(evs) || len(lb.users) != len(users) {
			t.Fatalf("seed %d: %d events and %d user writes, want %d and %d", seed, len(lb.evs), len(lb.users), len(evs), len(users))
		}
		for i := range evs {
			if !reflect.DeepEqual(lb.evs[i], evs[i]) {
				t.Fatalf("seed %d event %d: %+v, want %+v", seed, i, lb.evs[i], evs[i])
			}
		}
		for i, u := range users {
			got := lb.users[i]
			if got.ev != u.Index || got.op != u.op() || !reflect.DeepEqual(got.props, u.Props) {
				t.Fatalf("seed %d user write %d: %+v, want %+v", seed, i, got, u)
			}
		}
		for cut := range len(rec) {
			if err := decodeLiveRecord(rec[:cut], &lb); !errors.Is(err, errLiveRecord) {
				t.Fatalf("seed %d, record cut to %d of %d bytes: %v", seed, cut, len(rec), err)
			}
		}
		if err := decodeLiveRecord(append(rec, 0), &lb); !errors.Is(err, errLiveRecord) {
			t.Fatalf("seed %d, a byte appended: %v", seed, err)
		}
	}
}

// TestLiveRecordVersions: a record with only set and set-once writes is
// version 2, as older builds wrote and read it; version 2 and 1 records
// cannot carry the other operations, and a version 3 record must carry
// one.
func TestLiveRecordVersions(t *testing.T) {
	evs := []event.Event{{UserID: "u", Name: "e", Time: 1}}
	var lb liveBatch
	for _, tc := range []struct {
		op      UserOp
		version byte
	}{{UserSet, 2}, {UserSetOnce, 2}, {UserUnset, 3}, {UserAdd, 3}, {UserDelete, 3}} {
		users := []UserWrite{{Index: 0, Op: tc.op, Props: []event.Prop{{Name: "n", Value: event.Int(1)}}}}
		rec := appendLiveRecord(nil, evs, users, nil)
		if rec[0] != tc.version {
			t.Fatalf("%v: version %d, want %d", tc.op, rec[0], tc.version)
		}
		if err := decodeLiveRecord(rec, &lb); err != nil || lb.users[0].op != tc.op {
			t.Fatalf("%v: decoded %v, %v", tc.op, lb.users, err)
		}
		other := append([]byte(nil), rec...)
		other[0] = 5 - tc.version // 2 ↔ 3
		if err := decodeLiveRecord(other, &lb); !errors.Is(err, errLiveRecord) {
			t.Fatalf("%v as version %d: %v", tc.op, other[0], err)
		}
	}
}

// FuzzDecodeLiveRecord: no input makes the live record decoder panic;
// what decodes re-encodes to the same bytes (the encoding is canonical)
// and an error wraps errLiveRecord.
func FuzzDecodeLiveRecord(f *testing.F) {
	evs, users := liveRecordSample(5, 1)
	f.Add(appendLiveRecord(nil, evs, users, nil))
	f.Add(appendLiveRecord(nil, nil, nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var lb liveBatch
		if err := decodeLiveRecord(b, &lb); err != nil {
			if !errors.Is(err, errLiveRecord) {
				t.Fatalf("error does not wrap errLiveRecord: %v", err)
			}
			return
		}
		users := make([]UserWrite, len(lb.users))
		for i, u := range lb.users {
			users[i] = UserWrite{Index: u.ev, Op: u.op, Props: u.props}
		}
		if re := appendLiveRecord(nil, lb.evs, users, lb.ops); string(re) != string(b) {
			t.Fatalf("re-encoded %x, decoded from %x", re, b)
		}
	})
}

// BenchmarkLiveRecordDecode measures decoding one write-ahead-log record
// of 1,000 events with five properties and 250 user writes into a reused
// batch, as the live layer applies and replays records.
func BenchmarkLiveRecordDecode(b *testing.B) {
	evs, users := liveRecordSample(1000, 1)
	rec := appendLiveRecord(nil, evs, users, nil)
	var lb liveBatch
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if err := decodeLiveRecord(rec, &lb); err != nil {
			b.Fatal(err)
		}
	}
}
