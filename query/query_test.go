package query

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// genSource adapts the synthetic generator to storage.Source.
type genSource struct{ g *gen.Generator }

func (s genSource) Next(ev *event.Event) error {
	if !s.g.Next(ev) {
		return io.EOF
	}
	return nil
}

func importGen(t testing.TB, st *storage.Store, app string, cfg gen.Config) {
	t.Helper()
	g, err := gen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), app, []storage.Source{genSource{g}}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
}

func openStore(t testing.TB, dir string, shards int) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Config{Dir: dir, Shards: shards})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

const (
	genTrend  = `{"kind":"trend","app":"g","range":{"from":"2024-01-01","to":"2024-02-01"},"tz":"America/New_York","interval":"week","series":[{"event":"purchase"},{"event":"purchase","math":"users"},{"event":"$any","math":"users"}]}`
	genFunnel = `{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"steps":[{"event":"view_item"},{"event":"add_to_cart"},{"event":"begin_checkout"},{"event":"purchase"}],"window":"7d"}`
	genRet    = `{"kind":"retention","app":"g","range":{"from":"2024-01-01","to":"2024-02-01"},"tz":"Europe/Berlin","start":{"event":"install"},"return":{"event":"app_open"},"period":"day","periods":10}`
)

func run(t testing.TB, eng *Engine, js string) any {
	t.Helper()
	q, err := Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	res, err := eng.Run(context.Background(), q)
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return res
}

// withoutStats zeroes the fields that legitimately differ between runs.
func withoutStats(res any) any {
	switch r := res.(type) {
	case *TrendResult:
		c := *r
		c.Stats = Stats{}
		return &c
	case *FunnelResult:
		c := *r
		c.Stats = Stats{}
		return &c
	case *RetentionResult:
		c := *r
		c.Stats = Stats{}
		return &c
	}
	return res
}

// TestDeterministicAcrossWorkersAndShards: spec §8 — the same answer, bit
// for bit, for any parallelism and shard count.
func TestDeterministicAcrossWorkersAndShards(t *testing.T) {
	cfg := gen.Config{Events: 60_000, Seed: 5}
	var want []any
	for _, shards := range []int{1, 4, 16} {
		st := openStore(t, t.TempDir(), shards)
		importGen(t, st, "g", cfg)
		for _, workers := range []int{1, 2, 8} {
			eng := New(st, Config{Workers: workers})
			var got []any
			for _, js := range []string{genTrend, genFunnel, genRet} {
				got = append(got, withoutStats(run(t, eng, js)))
			}
			if want == nil {
				want = got
				continue
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					a, _ := json.Marshal(got[i])
					b, _ := json.Marshal(want[i])
					t.Fatalf("shards %d workers %d query %d differs:\n%s\n%s", shards, workers, i, a, b)
				}
			}
		}
	}
	// Sanity: the synthetic funnel converts and the numbers are not empty.
	f := want[1].(*FunnelResult)
	if f.Steps[0].Users == 0 || f.Steps[3].Users == 0 || f.Steps[3].Users >= f.Steps[0].Users {
		t.Fatalf("implausible funnel: %+v", f.Steps)
	}
}

func TestErrors(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 2000, Seed: 1})
	eng := New(st, Config{})
	cases := []struct {
		js, code, field string
	}{
		{`{"kind":"trend",`, CodeInvalidQuery, ""},
		{`{"kind":"trend","app":"g","serie":[]}`, CodeInvalidQuery, "serie"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","math":"sum"}]}`, CodeInvalidQuery, "series[0].math"},
		{`{"kind":"trend","app":"nope","series":[{"event":"a"}]}`, CodeNotFound, "app"},
		{`{"kind":"trend","app":"g","tz":"Mars/Olympus","series":[{"event":"a"}]}`, CodeInvalidQuery, "tz"},
		{`{"kind":"trend","app":"g","range":{"from":"2024-13-01","to":"2024-02-01"},"series":[{"event":"a"}]}`, CodeInvalidQuery, "range.from"},
		{`{"kind":"trend","app":"g","range":{"from":"2024-02-01","to":"2024-01-01"},"series":[{"event":"a"}]}`, CodeInvalidQuery, "range"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"}]}`, CodeInvalidQuery, "steps"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":""}]}`, CodeInvalidQuery, "steps[1].event"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"window":"7 days"}`, CodeInvalidQuery, "window"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"window":"400d"}`, CodeInvalidQuery, "window"},
		{`{"kind":"retention","app":"g"}`, CodeInvalidQuery, "start"},
		{`{"kind":"retention","app":"g","start":{"event":"a"},"type":"sometimes"}`, CodeInvalidQuery, "type"},
		{`{"kind":"pie","app":"g"}`, CodeInvalidQuery, "kind"},
	}
	for _, c := range cases {
		q, err := Parse([]byte(c.js))
		if err == nil {
			_, err = eng.Run(context.Background(), q)
		}
		var qe *Error
		if !errors.As(err, &qe) || qe.Code != c.code || qe.Field != c.field {
			t.Errorf("%s: got %v (%#v), want code %s field %q", c.js, err, qe, c.code, c.field)
			continue
		}
		b, _ := json.Marshal(qe)
		if !strings.HasPrefix(string(b), `{"error":{"code":"`+c.code) {
			t.Errorf("error JSON %s", b)
		}
	}
}

func TestUnknownEventGivesZeros(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 2000, Seed: 1})
	eng := New(st, Config{})
	res := run(t, eng, `{"kind":"funnel","app":"g","steps":[{"event":"install"},{"event":"no_such_event"}]}`).(*FunnelResult)
	if res.Steps[0].Users == 0 || res.Steps[1].Users != 0 || res.Steps[1].AvgSeconds != nil {
		t.Fatalf("%+v", res.Steps)
	}
}

// TestCorruptionIsReported: a corrupt segment makes a query fail with code
// corruption naming the file; it never answers.
func TestCorruptionIsReported(t *testing.T) {
	dir := t.TempDir()
	st, err := storage.Open(storage.Config{Dir: dir, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	importGen(t, st, "g", gen.Config{Events: 3000, Seed: 2})
	st.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "apps", "g", "seg", "*.seg"))
	if len(files) != 1 {
		t.Fatalf("segments: %v", files)
	}
	b, _ := os.ReadFile(files[0])
	b[len(b)/2] ^= 1
	os.WriteFile(files[0], b, 0o644)
	st = openStore(t, dir, 1)
	q, _ := Parse([]byte(genFunnel))
	_, err = New(st, Config{}).Run(context.Background(), q)
	var qe *Error
	if !errors.As(err, &qe) || qe.Code != CodeCorruption || !strings.Contains(qe.Message, filepath.Base(files[0])) {
		t.Fatalf("want corruption naming %s, got %v", filepath.Base(files[0]), err)
	}
}

func TestTimeout(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 2000, Seed: 1})
	eng := New(st, Config{Timeout: time.Nanosecond})
	q, _ := Parse([]byte(genFunnel))
	_, err := eng.Run(context.Background(), q)
	var qe *Error
	if !errors.As(err, &qe) || qe.Code != CodeLimitExceeded {
		t.Fatalf("want limit_exceeded, got %v", err)
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]int64{"90s": 90e6, "30m": 1800e6, "12h": 43200e6, "7d": 604800e6, "2w": 1209600e6, "0s": 0} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("%s: %d %v", s, got, err)
		}
	}
	for _, s := range []string{"", "d", "7", "-1d", "1.5d", "7y", "99999999999999999w"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
