package query

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
	"github.com/spurdb/spur/storage"
)

// evSource feeds testutil events to an import.
type evSource struct {
	evs []testutil.Ev
	i   int
}

func (s *evSource) Next(ev *event.Event) error {
	if s.i == len(s.evs) {
		return io.EOF
	}
	e := s.evs[s.i]
	s.i++
	*ev = event.Event{UserID: e.User, Time: e.Time, Name: e.Name, Pos: event.Pos{File: "mem", Line: int64(s.i)}}
	return nil
}

var zones = []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"}

// TestDifferentialAgainstNaive is the end-to-end differential test: random
// trails with many ties and repeated events are imported (in 1–3 imports,
// into 1–8 shards, so trails span segments) and every analysis run through
// the JSON query path must equal the naive reference implementation of the
// spec exactly, for 200 seeds.
func TestDifferentialAgainstNaive(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 40
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { diffSeed(t, int64(seed)) })
	}
}

func diffSeed(t *testing.T, seed int64) {
	r := rand.New(rand.NewPCG(uint64(seed), 99))
	evs := testutil.RandomEvents(seed, testutil.RandomOptions{Users: 3 + r.IntN(25), Events: 50 + r.IntN(500)})
	st := openStore(t, t.TempDir(), 1<<r.IntN(4))
	// Split into consecutive imports: arrival order is preserved.
	cuts := []int{0, r.IntN(len(evs) + 1), len(evs)}
	if r.IntN(2) == 0 {
		cuts = []int{0, len(evs)}
	}
	for i := 0; i+1 < len(cuts); i++ {
		if cuts[i] == cuts[i+1] {
			continue
		}
		_, err := st.Import(context.Background(), "d", []storage.Source{&evSource{evs: evs[cuts[i]:cuts[i+1]]}},
			storage.ImportOptions{BlockRows: 1 + r.IntN(100), FlushRows: 10 + r.IntN(300)})
		if err != nil {
			t.Fatal(err)
		}
	}
	eng := New(st, Config{Workers: 1 + r.IntN(3)})
	names := []string{"a", "b", "c", "d", "$any", "zz"}
	pick := func() string { return names[r.IntN(len(names))] }
	tz := zones[r.IntN(len(zones))]
	loc, _ := time.LoadLocation(tz)
	span0 := time.Date(2021, 3, 25, 0, 0, 0, 0, time.UTC).UnixMicro()
	instant := func() int64 { return span0 + r.Int64N(6*24)*3600e6 + r.Int64N(3)*1e6 }
	from := instant()
	to := from + 1 + r.Int64N(5*86400e6)
	rng := map[string]string{"from": fmtInstant(from), "to": fmtInstant(to)}
	ivs := []timebucket.Interval{timebucket.Hour, timebucket.Day, timebucket.Week, timebucket.Month}

	// Trend.
	{
		iv := ivs[r.IntN(3)]
		ns := 1 + r.IntN(3)
		tq := testutil.TrendQuery{Bounds: timebucket.Bounds(from, to, iv, loc, timebucket.Monday), From: from, To: to}
		var series []map[string]string
		for range ns {
			ev, m := pick(), analysis.MathCount
			if r.IntN(2) == 0 {
				m = analysis.MathUsers
			}
			tq.Events, tq.Math = append(tq.Events, ev), append(tq.Math, m)
			series = append(series, map[string]string{"event": ev, "math": m.String()})
		}
		res := runJSON(t, eng, map[string]any{"kind": "trend", "app": "d", "range": rng, "tz": tz, "interval": iv.String(), "series": series}).(*TrendResult)
		want := testutil.NaiveTrend(evs, tq)
		for i, s := range want.Series {
			got := res.Series[i]
			if int64(got.Total) != s.Total || len(got.Buckets) != len(s.Buckets) {
				t.Fatalf("trend series %d: total %v want %d, %d buckets want %d", i, got.Total, s.Total, len(got.Buckets), len(s.Buckets))
			}
			for b, v := range s.Buckets {
				if int64(got.Buckets[b].Value) != v || got.Buckets[b].Start != formatTime(tq.Bounds[b], loc) {
					t.Fatalf("trend series %d bucket %d: %+v want %d at %s", i, b, got.Buckets[b], v, formatTime(tq.Bounds[b], loc))
				}
			}
		}
	}
	// Funnel.
	{
		n := 2 + r.IntN(3)
		windows := []string{"30m", "1h", "90m", "1d", "2d"}
		win := windows[r.IntN(len(windows))]
		w, _ := ParseDuration(win)
		fq := testutil.FunnelQuery{Window: w, From: from, To: to}
		var steps []map[string]string
		for range n {
			s := pick()
			fq.Steps = append(fq.Steps, s)
			steps = append(steps, map[string]string{"event": s})
		}
		res := runJSON(t, eng, map[string]any{"kind": "funnel", "app": "d", "range": rng, "tz": tz, "steps": steps, "window": win}).(*FunnelResult)
		want, _ := testutil.NaiveFunnel(evs, fq)
		for k, s := range want.Steps {
			got := res.Steps[k]
			if got.Users != s.Users || got.Conversion != s.Conversion || got.ConversionFromPrevious != s.ConversionFromPrevious ||
				(got.AvgSeconds != nil) != s.HasTime || (s.HasTime && (*got.AvgSeconds != s.AvgSeconds || *got.MedianSeconds != s.MedianSeconds)) {
				t.Fatalf("funnel %v window %s step %d: got %+v want %+v", fq.Steps, win, k+1, got, s)
			}
		}
	}
	// Retention, every option.
	{
		iv := ivs[r.IntN(4)]
		rq := testutil.RetentionQuery{Start: pick(), Return: pick(), Interval: iv, Loc: loc, Periods: 1 + r.IntN(6),
			Type: analysis.RetentionType(r.IntN(2)), Windows: analysis.RetentionWindows(r.IntN(2)),
			Criterion: analysis.RetentionCriterion(r.IntN(2)), From: from, To: to}
		if iv == timebucket.Hour && to-from > 2*86400e6 {
			rq.Interval = timebucket.Day
		}
		q := map[string]any{"kind": "retention", "app": "d", "range": rng, "tz": tz, "start": map[string]string{"event": rq.Start},
			"return": map[string]string{"event": rq.Return}, "period": rq.Interval.String(), "periods": rq.Periods,
			"type": rq.Type.String(), "windows": rq.Windows.String(), "criterion": rq.Criterion.String()}
		res := runJSON(t, eng, q).(*RetentionResult)
		want := testutil.NaiveRetention(evs, rq)
		if len(res.Cohorts) != len(want.Cohorts) {
			t.Fatalf("retention: %d cohorts want %d", len(res.Cohorts), len(want.Cohorts))
		}
		for c, wc := range want.Cohorts {
			gc := res.Cohorts[c]
			if gc.Size != wc.Size || fmt.Sprint(gc.Retained) != fmt.Sprint(wc.Retained) || gc.Start != formatTime(wc.Start, loc) {
				t.Fatalf("retention %+v cohort %d: got %s %d %v want %s %d %v", q, c, gc.Start, gc.Size, gc.Retained,
					formatTime(wc.Start, loc), wc.Size, wc.Retained)
			}
		}
	}
}

func fmtInstant(us int64) string { return time.UnixMicro(us).UTC().Format(time.RFC3339Nano) }

func runJSON(t *testing.T, eng *Engine, q map[string]any) any {
	t.Helper()
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, eng, string(b))
}
