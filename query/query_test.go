package query

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/gen"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/storage"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func importGen(t testing.TB, st *storage.Store, app string, cfg gen.Config) {
	t.Helper()
	importGenBlocks(t, st, app, cfg, 0)
}

// importGenBlocks is importGen with events blocks of blockRows rows (0:
// the default), so that small data still spans many blocks.
func importGenBlocks(t testing.TB, st *storage.Store, app string, cfg gen.Config, blockRows int) {
	t.Helper()
	g, err := gen.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), app, []storage.Source{gen.Source{G: g}}, storage.ImportOptions{BlockRows: blockRows}); err != nil {
		t.Fatal(err)
	}
	us, err := gen.NewUserStream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Import(context.Background(), app, []storage.Source{userStream{us}}, storage.ImportOptions{Kind: storage.KindUsers}); err != nil {
		t.Fatal(err)
	}
}

// userStream adapts gen.UserStream to storage.Source.
type userStream struct{ s *gen.UserStream }

func (s userStream) Next(ev *event.Event) error {
	if !s.s.Next(ev) {
		return io.EOF
	}
	return nil
}

func openStore(t testing.TB, dir string, shards int) *storage.Store {
	t.Helper()
	st, err := storage.Open(storage.Config{Dir: dir, Shards: shards, Logger: slog.New(slog.DiscardHandler)})
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
	// Every option at once, on the synthetic data (docs/analytics.md §3-§7).
	genTrendAll = `{"kind":"trend","app":"g","range":{"from":"2024-01-01","to":"2024-02-15"},"tz":"Europe/Berlin","interval":"week","week_start":"sunday",
		"where":[{"property":"country","op":"neq","value":"US"}],
		"series":[{"event":"purchase","math":"sum","property":"price"},{"event":"purchase","math":"p90","property":"price"},
		          {"event":"add_to_cart","math":"avg","property":"price","where":[{"property":"price","op":"gt","value":10}]},
		          {"event":"$any","math":"users"},{"event":"app_open","math":"count_per_user_median"},{"event":"$any","math":"wau"}],
		"breakdown":{"property":"platform","limit":2},
		"cohort":{"and":[{"performed":{"event":"app_open"},"count":{"op":"gte","value":2}},{"not":{"user_property":{"property":"channel","op":"eq","value":"paid_search"}}}]}}`
	genFunnelAll = `{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},
		"steps":[{"event":"view_item"},{"event":"add_to_cart","where":[{"property":"price","op":"lte","value":200}]},{"event":"purchase"}],"window":"3d",
		"breakdown":{"property":"country","source":"user","limit":3},
		"cohort":{"or":[{"first_performed":{"event":"install"},"window":{"from":"2024-01-01","to":"2024-02-01"}},{"performed":{"event":"share"}}]},
		"list":{"step":2,"dropped":true,"limit":50,"breakdown_value":"(other)"}}`
	genRetAll = `{"kind":"retention","app":"g","range":{"from":"2024-01-01","to":"2024-01-29"},"tz":"America/New_York","start":{"event":"app_open"},
		"return":{"event":"purchase","where":[{"property":"channel","op":"in","value":["organic","email"]}]},
		"period":"week","periods":4,"type":"recurring","windows":"rolling","criterion":"on_or_after",
		"breakdown":{"property":"channel","limit":2},"cohort":{"not_performed":{"event":"uninstall"},"window":{"last_days":30}},
		"list":{"cohort_start":"2024-01-08","period":1,"limit":20,"offset":5}}`
	genCohort = `{"kind":"cohort","app":"g","range":{"from":"2024-01-01","to":"2024-02-01"},
		"cohort":{"and":[{"performed":{"event":"purchase"},"count":{"op":"gte","value":2}},{"user_property":{"property":"platform","op":"eq","value":"ios"}}]},
		"list":{"limit":30,"offset":10}}`
)

func run(t testing.TB, eng *Engine, js string) Result {
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
func withoutStats(res Result) Result {
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
	case *CohortResult:
		c := *r
		c.Stats = Stats{}
		return &c
	}
	return res
}

// TestDeterministicAcrossWorkersAndShards: docs/analytics.md §8 — the same answer, bit
// for bit, for any parallelism (GOMAXPROCS 1, 2, 8 and as many scan
// workers) and shard count, with every option: filters, property maths,
// breakdowns with "(other)", cohorts and lists.
func TestDeterministicAcrossWorkersAndShards(t *testing.T) {
	cfg := gen.Config{Events: 60_000, Seed: 5}
	var want []any
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, shards := range []int{1, 4, 16} {
		st := openStore(t, t.TempDir(), shards)
		importGen(t, st, "g", cfg)
		for _, workers := range []int{1, 2, 8} {
			runtime.GOMAXPROCS(workers)
			eng := New(st, Config{Workers: workers})
			var got []any
			for _, js := range []string{genTrend, genFunnel, genRet, genTrendAll, genFunnelAll, genRetAll, genCohort} {
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
	tr := want[3].(*TrendResult)
	if len(tr.Series) != 6*3 || *tr.Series[2].BreakdownValue != otherLabel || tr.Series[0].Total == 0 {
		t.Fatalf("implausible trend with every option: %d rows, first %+v", len(tr.Series), tr.Series[0])
	}
	fa := want[4].(*FunnelResult)
	if len(fa.Breakdown) != 4 || fa.List == nil || fa.List.Users == 0 {
		t.Fatalf("implausible funnel with every option: %+v", fa)
	}
	if c := want[6].(*CohortResult); c.Users <= 10 || len(c.UserIDs) == 0 {
		t.Fatalf("implausible cohort: %+v", c)
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
		{`{"kind":"trend","app":"g"} {}`, CodeInvalidQuery, ""},
		{`{"kind":"trend","app":"g","series":[{"event":"a","math":"total"}]}`, CodeInvalidQuery, "series[0].math"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","math":"sum"}]}`, CodeInvalidQuery, "series[0].property"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","math":"sum","property":"platform"}]}`, CodeInvalidQuery, "series[0].property"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","math":"p90","property":"nope"}]}`, CodeInvalidQuery, "series[0].property"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","property":"price"}]}`, CodeInvalidQuery, "series[0].property"},
		// Filters: unknown property, coercion failures name the field.
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"price","op":"gt","value":1},{"property":"colour","op":"eq","value":"red"}]}]}`, CodeInvalidQuery, "series[0].where[1].property"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"price","op":"gt","value":1},{"property":"price","op":"eq","value":"cheap"}]}]}`, CodeInvalidQuery, "series[0].where[1].value"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"session_id","op":"eq","value":1.5}]}]}`, CodeInvalidQuery, "series[0].where[0].value"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"session_id","op":"in","value":[1,"x"]}]}]}`, CodeInvalidQuery, "series[0].where[0].value[1]"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"session_id","op":"contains","value":"1"}]}]}`, CodeInvalidQuery, "series[0].where[0].op"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"price","op":"like","value":1}]}]}`, CodeInvalidQuery, "series[0].where[0].op"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"price","op":"eq"}]}]}`, CodeInvalidQuery, "series[0].where[0].value"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"platform","op":"eq","value":"ios","source":"device"}]}]}`, CodeInvalidQuery, "series[0].where[0].source"},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"price","op":"eq","value":1,"source":"user"}]}]}`, CodeInvalidQuery, "series[0].where[0].property"},
		{`{"kind":"trend","app":"g","where":[{"property":"signup_time","op":"gt","value":"yesterday","source":"user"}],"series":[{"event":"a"}]}`, CodeInvalidQuery, "where[0].value"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b","where":[{"property":"nope","op":"is_set"}]}]}`, CodeInvalidQuery, "steps[1].where[0].property"},
		{`{"kind":"retention","app":"g","start":{"event":"a"},"return":{"event":"b","where":[{"property":"price","op":"lt","value":true}]}}`, CodeInvalidQuery, "return.where[0].value"},
		// Breakdowns.
		{`{"kind":"trend","app":"g","series":[{"event":"a"}],"breakdown":{"property":"colour"}}`, CodeInvalidQuery, "breakdown.property"},
		{`{"kind":"trend","app":"g","series":[{"event":"a"}],"breakdown":{"property":"price","source":"user"}}`, CodeInvalidQuery, "breakdown.property"},
		{`{"kind":"trend","app":"g","series":[{"event":"a"}],"breakdown":{"property":"platform","limit":-1}}`, CodeInvalidQuery, "breakdown.limit"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"breakdown":{"property":"platform","source":"session"}}`, CodeInvalidQuery, "breakdown.source"},
		// Lists.
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"list":{"step":3}}`, CodeInvalidQuery, "list.step"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"list":{"step":1,"limit":100000}}`, CodeInvalidQuery, "list.limit"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"list":{"step":1,"breakdown_value":"ios"}}`, CodeInvalidQuery, "list.breakdown_value"},
		{`{"kind":"retention","app":"g","range":{"from":"2024-01-01","to":"2024-01-08"},"start":{"event":"a"},"list":{"cohort_start":"2023-12-01"}}`, CodeInvalidQuery, "list.cohort_start"},
		{`{"kind":"retention","app":"g","range":{"from":"2024-01-01","to":"2024-01-08"},"start":{"event":"a"},"list":{"cohort_start":"2024-01-02","period":7}}`, CodeInvalidQuery, "list.period"},
		// Cohorts.
		{`{"kind":"cohort","app":"g"}`, CodeInvalidQuery, "cohort"},
		{`{"kind":"cohort","app":"g","cohort":{"performed":{"event":"a"},"not":{"performed":{"event":"b"}}}}`, CodeInvalidQuery, "cohort"},
		{`{"kind":"cohort","app":"g","cohort":{"and":[{"performed":{"event":"a"},"count":{"op":"gt","value":1}}]}}`, CodeInvalidQuery, "cohort.and[0].count.op"},
		{`{"kind":"cohort","app":"g","cohort":{"and":[{"performed":{"event":"a"},"window":{"last_days":0}}]}}`, CodeInvalidQuery, "cohort.and[0].window.last_days"},
		{`{"kind":"cohort","app":"g","cohort":{"not_performed":{"event":"a"},"window":{"last_days":3,"from":"2024-01-01"}}}`, CodeInvalidQuery, "cohort.window"},
		{`{"kind":"cohort","app":"g","cohort":{"user_property":{"property":"price","op":"gt","value":1}}}`, CodeInvalidQuery, "cohort.user_property.property"},
		{`{"kind":"cohort","app":"g","cohort":{"performed":{"event":"a"},"windw":{}}}`, CodeInvalidQuery, "cohort.windw"},
		{`{"kind":"cohort","app":"g","cohort":{"user_property":{"property":"platform","op":"eq","value":"ios"}},"where":[{"property":"price","op":"gt","value":1}]}`, CodeInvalidQuery, "where"},
		{`{"kind":"cohort","app":"g","cohort":"no_such_cohort"}`, CodeNotFound, "cohort"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"cohort":{"or":[]}}`, CodeInvalidQuery, "cohort.or"},
		{`{"kind":"trend","app":"nope","series":[{"event":"a"}]}`, CodeNotFound, "app"},
		{`{"kind":"trend","app":"g","tz":"Mars/Olympus","series":[{"event":"a"}]}`, CodeInvalidQuery, "tz"},
		// The server's own zone is never implied (docs/analytics.md §9).
		{`{"kind":"trend","app":"g","tz":"Local","series":[{"event":"a"}]}`, CodeInvalidQuery, "tz"},
		{`{"kind":"trend","app":"g","tz":"localtime","series":[{"event":"a"}]}`, CodeInvalidQuery, "tz"},
		{`{"kind":"trend","app":"g","tz":"posixrules","series":[{"event":"a"}]}`, CodeInvalidQuery, "tz"},
		// Nested typos and type errors keep their JSON path.
		{`{"kind":"trend","app":"g","series":[{"event":"a"},{"evnt":"b"}]}`, CodeInvalidQuery, "series[1].evnt"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b","where":[{"property":"p","op":"eq","vale":1}]}]}`, CodeInvalidQuery, "steps[1].where[0].vale"},
		{`{"kind":"trend","app":"g","series":[{"event":"a"},{"event":["b"]}]}`, CodeInvalidQuery, "series[1].event"},
		{`{"kind":"trend","app":"g","range":{"from":"2024-01-01","too":"x"},"series":[{"event":"a"}]}`, CodeInvalidQuery, "range.too"},
		{`{"kind":"cohort","app":"g","cohort":{"and":[{"performed":{"event":"a"}},{"performed":{"evnt":"a"}}]}}`, CodeInvalidQuery, "cohort.and[1].performed.evnt"},
		{`{"kind":"trend","app":"g","range":{"from":"1704067200","to":"2024-02-01"},"series":[{"event":"a"}]}`, CodeInvalidQuery, "range.from"},
		{`{"kind":"trend","app":"g","range":{"from":"2024-13-01","to":"2024-02-01"},"series":[{"event":"a"}]}`, CodeInvalidQuery, "range.from"},
		{`{"kind":"trend","app":"g","range":{"from":"2024-02-01","to":"2024-01-01"},"series":[{"event":"a"}]}`, CodeInvalidQuery, "range"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"}]}`, CodeInvalidQuery, "steps"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":""}]}`, CodeInvalidQuery, "steps[1].event"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"window":"7 days"}`, CodeInvalidQuery, "window"},
		{`{"kind":"funnel","app":"g","steps":[{"event":"a"},{"event":"b"}],"window":"101y"}`, CodeInvalidQuery, "window"},
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
	files, _ := filepath.Glob(filepath.Join(dir, "apps", "g", "seg", "e-*.seg"))
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
	for s, want := range map[string]int64{"90s": 90e6, "30m": 1800e6, "12h": 43200e6, "7d": 604800e6, "2w": 1209600e6, "0s": 0,
		"3mo": 90 * 86400e6, "1y": 365 * 86400e6, "100y": 36500 * 86400e6} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("%s: %d %v", s, got, err)
		}
	}
	for _, s := range []string{"", "d", "7", "-1d", "+1d", "1.5d", "7x", "1mon", "m", "mo", "1 d", "99999999999999999w", "99999999999999y"} {
		if _, err := ParseDuration(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestListsEqualCounts is the property test of docs/analytics.md §7: the users listed
// for a funnel step or a retention cell are exactly the users counted
// there. On synthetic data, for every step (overall and per breakdown
// value, "(other)" included) the listed users number the step's users,
// the users who dropped off after step k are those who reached k but not
// k+1, and for every retention cell the listed users number the cell's
// count and lie inside the cohort's list.
func TestListsEqualCounts(t *testing.T) {
	st := openStore(t, t.TempDir(), 4)
	// Blocks of 500 rows: the scan reads most blocks after it has taken a
	// shard's cursor into drain, where ids are decoded only for lists.
	importGenBlocks(t, st, "g", gen.Config{Events: 20_000, Seed: 9}, 500)
	eng := New(st, Config{Workers: 3})
	ids := func(l *ListResult) map[string]bool {
		if int64(len(l.UserIDs)) != l.Users {
			t.Fatalf("page of %d ids for %d users: the test's limit is too small", len(l.UserIDs), l.Users)
		}
		m := map[string]bool{}
		for _, id := range l.UserIDs {
			m[id] = true
		}
		return m
	}
	const funnel = `{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"steps":[{"event":"view_item"},{"event":"add_to_cart"},{"event":"purchase"}],"window":"3d","breakdown":{"property":"platform","limit":2}%s}`
	base := run(t, eng, fmt.Sprintf(funnel, "")).(*FunnelResult)
	for _, bv := range []*string{nil, ptr("ios"), ptr(otherLabel)} {
		steps := base.Steps
		extra := ""
		if bv != nil {
			extra = fmt.Sprintf(`,"breakdown_value":%q`, *bv)
			for _, b := range base.Breakdown {
				if b.Value == *bv {
					steps = b.Steps
				}
			}
		}
		var reached []map[string]bool
		for k := 1; k <= 3; k++ {
			l := run(t, eng, fmt.Sprintf(funnel, fmt.Sprintf(`,"list":{"step":%d,"limit":10000%s}`, k, extra))).(*FunnelResult).List
			if l.Users != steps[k-1].Users || l.Users == 0 {
				t.Fatalf("step %d (%v): listed %d users, counted %d", k, bv, l.Users, steps[k-1].Users)
			}
			reached = append(reached, ids(l))
		}
		for k := 1; k <= 3; k++ {
			d := ids(run(t, eng, fmt.Sprintf(funnel, fmt.Sprintf(`,"list":{"step":%d,"dropped":true,"limit":10000%s}`, k, extra))).(*FunnelResult).List)
			for u := range reached[k-1] {
				if want := k == 3 || !reached[k][u]; d[u] != want {
					t.Fatalf("step %d (%v): user %s dropped %v, want %v", k, bv, u, d[u], want)
				}
			}
			if len(d) > len(reached[k-1]) {
				t.Fatalf("step %d: dropped list has users who never reached the step", k)
			}
		}
	}
	const ret = `{"kind":"retention","app":"g","range":{"from":"2024-01-01","to":"2024-01-15"},"start":{"event":"install"},"return":{"event":"app_open"},"period":"day","periods":5,"breakdown":{"property":"channel","source":"user","limit":2}%s}`
	rr := run(t, eng, fmt.Sprintf(ret, "")).(*RetentionResult)
	checked := 0
	for _, c := range rr.Cohorts {
		if c.Size == 0 {
			continue
		}
		var members map[string]bool
		for k := range c.Retained {
			l := run(t, eng, fmt.Sprintf(ret, fmt.Sprintf(`,"list":{"cohort_start":%q,"period":%d,"breakdown_value":%q,"limit":10000}`, c.Start, k, *c.BreakdownValue))).(*RetentionResult).List
			if l.Users != c.Retained[k] {
				t.Fatalf("cohort %s %s period %d: listed %d, counted %d", c.Start, *c.BreakdownValue, k, l.Users, c.Retained[k])
			}
			got := ids(l)
			if k == 0 {
				members = got
			}
			for u := range got {
				if !members[u] {
					t.Fatalf("cohort %s period %d lists %s, not a cohort member", c.Start, k, u)
				}
			}
			checked++
		}
	}
	if checked < 20 {
		t.Fatalf("only %d retention cells checked", checked)
	}
	// Without a breakdown or property columns the scan reads blocks
	// without user ids unless a list asks for them.
	const plain = `{"kind":"funnel","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"steps":[{"event":"view_item"},{"event":"purchase"}],"window":"3d"%s}`
	ps := run(t, eng, fmt.Sprintf(plain, "")).(*FunnelResult).Steps
	for k := 1; k <= 2; k++ {
		l := run(t, eng, fmt.Sprintf(plain, fmt.Sprintf(`,"list":{"step":%d,"limit":10000}`, k))).(*FunnelResult).List
		if got := ids(l); int64(len(got)) != ps[k-1].Users || got[""] {
			t.Fatalf("plain funnel step %d: listed %d distinct ids (empty id: %v), counted %d", k, len(got), got[""], ps[k-1].Users)
		}
	}
}

// TestMemoryBudget: a query whose state exceeds the budget fails with
// limit_exceeded naming the budget, and the engine and store stay usable
// (goleak in TestMain checks that no goroutine is left behind).
func TestMemoryBudget(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 50_000, Seed: 3})
	// Exact percentiles keep every value: 50k events of the $any series.
	const q = `{"kind":"trend","app":"g","series":[{"event":"$any","math":"count_per_user_median"},{"event":"$any","math":"p99","property":"session_id"}],"breakdown":{"property":"country","source":"user"}}`
	parsed, err := Parse([]byte(q))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(st, Config{MemoryBudget: 64 << 10}).Run(context.Background(), parsed)
	var qe *Error
	if !errors.As(err, &qe) || qe.Code != CodeLimitExceeded || !strings.Contains(qe.Message, "memory budget of 65536 bytes") {
		t.Fatalf("want limit_exceeded for the memory budget, got %v", err)
	}
	res := run(t, New(st, Config{}), q).(*TrendResult)
	if res.Stats.PeakMemoryBytes <= 64<<10 || res.Series[0].Total == 0 {
		t.Fatalf("after a budget failure the engine must answer: %+v", res.Stats)
	}
}

// TestSavedCohorts: a saved cohort is stored per app, evaluated at query
// time (an import after saving changes its users), usable by name as a
// filter and inside other cohorts; cycles and unknown names are errors.
func TestSavedCohorts(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 5_000, Seed: 4})
	eng := New(st, Config{})
	app, _ := st.App("g")
	save := func(name, def string) {
		t.Helper()
		if err := eng.CheckCohort("g", []byte(def)); err != nil {
			t.Fatalf("CheckCohort(%s): %v", def, err)
		}
		if err := app.SaveCohort(storage.SavedCohort{Name: name, Definition: json.RawMessage(def)}); err != nil {
			t.Fatal(err)
		}
	}
	save("buyers", `{"performed":{"event":"purchase"}}`)
	save("ios_buyers", `{"and":["buyers",{"user_property":{"property":"platform","op":"eq","value":"ios"}}]}`)
	count := func(cohort string) int64 {
		return run(t, eng, `{"kind":"cohort","app":"g","range":{"from":"2024-01-01","to":"2024-04-01"},"cohort":`+cohort+`}`).(*CohortResult).Users
	}
	buyers, iosBuyers := count(`"buyers"`), count(`{"saved":"ios_buyers"}`)
	inline := count(`{"and":[{"performed":{"event":"purchase"}},{"user_property":{"property":"platform","op":"eq","value":"ios"}}]}`)
	if buyers == 0 || iosBuyers == 0 || iosBuyers >= buyers || iosBuyers != inline {
		t.Fatalf("buyers %d, ios buyers %d, inline %d", buyers, iosBuyers, inline)
	}
	// Used as a filter: the funnel of buyers only.
	all := run(t, eng, genFunnel).(*FunnelResult)
	f := run(t, eng, strings.Replace(genFunnel, `"window"`, `"cohort":"buyers","window"`, 1)).(*FunnelResult)
	if f.Steps[0].Users == 0 || f.Steps[0].Users >= all.Steps[0].Users || f.Steps[3].Users != all.Steps[3].Users {
		t.Fatalf("funnel of buyers %+v vs all %+v", f.Steps, all.Steps)
	}
	// Never stale: new purchases after saving change the cohort.
	if _, err := st.Import(context.Background(), "g", []storage.Source{&evSource{evs: []testutil.Ev{{User: "newcomer", Time: time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), Name: "purchase"}}}}, storage.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := count(`"buyers"`); got != buyers+1 {
		t.Fatalf("after an import buyers = %d, want %d", got, buyers+1)
	}
	save("loop_a", `{"performed":{"event":"purchase"}}`)
	if err := app.SaveCohort(storage.SavedCohort{Name: "loop_b", Definition: json.RawMessage(`{"not":"loop_a"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := app.SaveCohort(storage.SavedCohort{Name: "loop_a", Definition: json.RawMessage(`{"or":["loop_b"]}`)}); err != nil {
		t.Fatal(err)
	}
	for def, code := range map[string]string{`"loop_a"`: CodeInvalidQuery, `"nope"`: CodeNotFound, `{"saved":"nope"}`: CodeNotFound, `{"performed":{"event":""}}`: CodeInvalidQuery} {
		err := eng.CheckCohort("g", []byte(def))
		var qe *Error
		if !errors.As(err, &qe) || qe.Code != code {
			t.Errorf("CheckCohort(%s) = %v, want %s", def, err, code)
		}
	}
	cs, err := app.Cohorts()
	if err != nil || len(cs) != 4 || cs[0].Name != "buyers" {
		t.Fatalf("Cohorts() = %+v, %v", cs, err)
	}
	if err := app.DeleteCohort("loop_b"); err != nil {
		t.Fatal(err)
	}
	if err := app.DeleteCohort("loop_b"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := app.SaveCohort(storage.SavedCohort{Name: "Bad Name", Definition: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("invalid cohort name accepted")
	}
}

// TestSharedQuantileSeries runs quantile series of one property over the
// same matcher (which share a mask bit and one value list per cell) beside
// series that must not share (another filter, another event, a sum), with
// and without a breakdown, and checks every row against the series run
// alone.
func TestSharedQuantileSeries(t *testing.T) {
	st := openStore(t, t.TempDir(), 4)
	importGen(t, st, "g", gen.Config{Events: 40_000, Seed: 9})
	eng := New(st, Config{Workers: 2})
	series := []string{
		`{"event":"purchase","math":"median","property":"price","label":"a"}`,
		`{"event":"purchase","math":"sum","property":"price","label":"b"}`,
		`{"event":"purchase","math":"p90","property":"price","label":"c"}`,
		`{"event":"purchase","math":"p90","property":"price","label":"d","where":[{"property":"price","op":"gt","value":20}]}`,
		`{"event":"add_to_cart","math":"p99","property":"price","label":"e"}`,
		`{"event":"purchase","math":"p75","property":"price","label":"f"}`,
	}
	for _, bd := range []string{"", `,"breakdown":{"property":"platform","limit":2}`} {
		q := func(ss ...string) string {
			return `{"kind":"trend","app":"g","range":{"from":"2024-01-01","to":"2024-03-01"},"interval":"week","series":[` + strings.Join(ss, ",") + `]` + bd + `}`
		}
		all := run(t, eng, q(series...)).(*TrendResult)
		rows := 0
		for _, s := range series {
			alone := run(t, eng, q(s)).(*TrendResult)
			for _, want := range alone.Series {
				found := false
				for _, got := range all.Series {
					if got.Label == want.Label && reflect.DeepEqual(got.BreakdownValue, want.BreakdownValue) {
						got.Series = 0 // its index among all the series; alone, 0
						if !reflect.DeepEqual(got, want) {
							t.Fatalf("breakdown %q, series %s: got %+v, want %+v", bd, s, got, want)
						}
						found = true
					}
				}
				if !found {
					t.Fatalf("breakdown %q, series %s: row %v missing", bd, s, want.BreakdownValue)
				}
				rows++
			}
		}
		if rows != len(all.Series) || all.Series[0].Total == 0 {
			t.Fatalf("breakdown %q: %d rows alone, %d together, first total %v", bd, rows, len(all.Series), all.Series[0].Total)
		}
	}
}

// TestErrorMessages: the messages of nested errors name the path, and a
// long bad value is quoted briefly.
func TestErrorMessages(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 500, Seed: 1})
	eng := New(st, Config{})
	for _, c := range []struct{ js, want string }{
		{`{"kind":"trend","app":"g","series":[{"evnt":"a"}]}`, `invalid_query: series[0].evnt: unknown field "evnt" (known: event, where, math, property, label)`},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"p","op":"eq","value":1,"sorce":"user"}]}]}`, `invalid_query: series[0].where[0].sorce: unknown field "sorce"`},
		{`{"kind":"trend","app":"g","interval":7,"series":[{"event":"a"}]}`, `invalid_query: interval: want a string, found the number 7`},
		{`{"kind":"trend","app":"g","tz":"Local","series":[{"event":"a"}]}`, `invalid_query: tz: time zone "Local" is not an IANA time zone name`},
		{`{"kind":"trend","app":"g","series":[{"event":"a","where":[{"property":"` + strings.Repeat("\u00ff", 100) + `","op":"eq","value":1}]}]}`, `(200 bytes) in app "g"`},
	} {
		q, err := Parse([]byte(c.js))
		if err == nil {
			_, err = eng.Run(context.Background(), q)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %s", c.js, err, c.want)
		}
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("%s: error of %d bytes", c.js, len(err.Error()))
		}
	}
}

// TestRangeOffsets: range bounds with the ISO 8601 offsets ±hh and ±hhmm,
// and without an offset (wall clock in tz), resolve to the same instants
// as their RFC 3339 spelling.
func TestRangeOffsets(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 2000, Seed: 1})
	eng := New(st, Config{})
	want := run(t, eng, `{"kind":"trend","app":"g","tz":"Europe/Berlin","range":{"from":"2024-01-01T00:00:00+01:00","to":"2024-01-20T13:49:26.513Z"},"series":[{"event":"$any"}]}`).(*TrendResult)
	for _, r := range [][2]string{
		{"2024-01-01 00:00:00+01", "2024-01-20 13:49:26.513+00"},
		{"2023-12-31T23:00:00+0000", "2024-01-20T14:49:26.513+0100"},
		{"2024-01-01", "2024-01-20 14:49:26.513"},
	} {
		got := run(t, eng, `{"kind":"trend","app":"g","tz":"Europe/Berlin","range":{"from":"`+r[0]+`","to":"`+r[1]+`"},"series":[{"event":"$any"}]}`).(*TrendResult)
		if got.Range != want.Range || !reflect.DeepEqual(got.Series, want.Series) {
			t.Errorf("range %v: %+v, want %+v", r, got.Range, want.Range)
		}
	}
}

// TestWarnings: an event name or string value seen nowhere in the app gets
// a warning naming its field; names and values seen somewhere, even
// outside the range, do not.
func TestWarnings(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 2000, Seed: 1})
	eng := New(st, Config{})
	res := run(t, eng, `{"kind":"trend","app":"g","range":{"from":"2000-01-01","to":"2000-01-02"},
		"where":[{"property":"country","op":"in","value":["US","Atlantis"]}],
		"series":[{"event":"purchase"},{"event":"purchse"},{"event":"$any","where":[{"property":"platform","op":"neq","value":"ios"},{"property":"platform","op":"eq","value":"iOS"}]}]}`).(*TrendResult)
	want := []Warning{
		{Code: WarnUnknownValue, Field: "where[0].value[1]"},
		{Code: WarnUnknownEvent, Field: "series[1].event"},
		{Code: WarnUnknownValue, Field: "series[2].where[1].value"},
	}
	if len(res.Warnings) != len(want) {
		t.Fatalf("warnings %+v, want %+v", res.Warnings, want)
	}
	for i, w := range want {
		if res.Warnings[i].Code != w.Code || res.Warnings[i].Field != w.Field {
			t.Errorf("warning %d = %+v, want %+v", i, res.Warnings[i], w)
		}
	}
	if m := res.Warnings[1].Message; m != `no event named "purchse" occurs in app "g": it matches nothing` {
		t.Errorf("message %q", m)
	}
	if m := res.Warnings[0].Message; !strings.Contains(m, `"Atlantis"`) || !strings.Contains(m, `"country"`) {
		t.Errorf("message %q", m)
	}
	b, _ := json.Marshal(res)
	if !strings.Contains(string(b), `"warnings":[{"code":"unknown_value","message":`) {
		t.Errorf("JSON %s", b)
	}
	// User properties and cohorts; no warning without a reason.
	fr := run(t, eng, `{"kind":"funnel","app":"g","steps":[{"event":"install"},{"event":"purchase","where":[{"property":"platform","op":"eq","value":"android","source":"user"}]}]}`).(*FunnelResult)
	if fr.Warnings != nil {
		t.Errorf("funnel warnings %+v", fr.Warnings)
	}
	cr := run(t, eng, `{"kind":"cohort","app":"g","cohort":{"and":[{"performed":{"event":"nope"}},{"user_property":{"property":"platform","op":"eq","value":"wii"}}]}}`).(*CohortResult)
	if len(cr.Warnings) != 2 || cr.Warnings[0].Field != "cohort.and[0].performed.event" || cr.Warnings[1].Field != "cohort.and[1].user_property.value" {
		t.Errorf("cohort warnings %+v", cr.Warnings)
	}
	b, _ = json.Marshal(fr)
	if strings.Contains(string(b), "warnings") {
		t.Errorf("empty warnings rendered: %s", b)
	}
}

// TestCancelledScanCause: a scan stopped by our own context is "query
// cancelled"; a cancellation the caller did not ask for is not blamed on
// the caller.
func TestCancelledScanCause(t *testing.T) {
	live := context.Background()
	if e := classify(fmt.Errorf("scan: %w", context.Canceled), live); e.Code != CodeInternal || strings.Contains(e.Message, "query cancelled") {
		t.Errorf("foreign cancellation: %v", e)
	}
	done, cancel := context.WithCancel(live)
	cancel()
	if e := classify(fmt.Errorf("scan: %w", context.Canceled), done); e.Message != "query cancelled" {
		t.Errorf("own cancellation: %v", e)
	}
}

// TestTableWarnings: the table form shows the warnings above the table.
func TestTableWarnings(t *testing.T) {
	st := openStore(t, t.TempDir(), 2)
	importGen(t, st, "g", gen.Config{Events: 500, Seed: 1})
	eng := New(st, Config{})
	res := run(t, eng, `{"kind":"trend","app":"g","series":[{"event":"purchse"}]}`)
	var b strings.Builder
	if err := WriteTable(&b, res); err != nil {
		t.Fatal(err)
	}
	want := "warning: series[0].event: no event named \"purchse\" occurs in app \"g\": it matches nothing\ntrend "
	if !strings.HasPrefix(b.String(), want) {
		t.Errorf("table:\n%s\nwant it to begin with\n%s", b.String(), want)
	}
}
