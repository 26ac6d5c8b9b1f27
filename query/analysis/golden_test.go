package analysis_test

import (
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "time/tzdata" // hermetic zone data when the host has none

	"github.com/spurdb/spur/event"
	"github.com/spurdb/spur/internal/testutil"
	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected outputs of testdata/*.txt from the kernels")

// Golden case files (testdata/*.txt, format of testutil.ParseCases). The
// input of a case is a query line followed by event lines; blank lines
// and lines starting with # are comments.
//
//	funnel base=T steps=a,b|c,$any window=1h from=T to=T
//	funnel_modes base=T steps=a,b window=1h from=T to=T order=strict excl=x:1-2,y:1-2
//	    view=trends interval=day tz=Z from_step=1 to_step=2 bins=3 breakdown=s attribution=step:2
//	trend base=T tz=Z interval=day week_start=monday series=a:count,$any:users from=T to=T
//	retention base=T tz=Z interval=day periods=3 start=a return=b type=first_time windows=calendar criterion=on from=T to=T
//	USER TIME NAME
//
// Event lines may end with string properties (s=x). Times are RFC 3339 (with optional fraction) or offsets from base such as
// +90m, -1us or +1d2h (Go durations plus a "d" day unit). The expected
// output is rendered by harness_test.go; every case is also run through
// the naive reference implementation, which must agree.
func TestGolden(t *testing.T) {
	testutil.RunCaseFiles(t, "testdata/*.txt", *rewrite, func(t *testing.T, where string, input []string) string {
		got, naive, err := runGolden(t, input)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if got != naive {
			t.Errorf("%s: kernel and naive reference disagree\nkernel:\n%s\nnaive:\n%s", where, got, naive)
		}
		return got
	})
}

// goldenParams holds a case's query line.
type goldenParams struct {
	kind string
	kv   map[string]string
	base int64
	has  bool // base given
	loc  *time.Location
}

func (p *goldenParams) str(key, def string) string {
	if v, ok := p.kv[key]; ok {
		return v
	}
	return def
}

func (p *goldenParams) time(key string) (int64, error) {
	v, ok := p.kv[key]
	if !ok {
		return 0, fmt.Errorf("missing %s=", key)
	}
	return p.parseTime(v)
}

func (p *goldenParams) parseTime(v string) (int64, error) {
	if strings.HasPrefix(v, "+") || strings.HasPrefix(v, "-") {
		if !p.has {
			return 0, fmt.Errorf("relative time %q without base=", v)
		}
		d, err := parseDur(v)
		return p.base + d, err
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return 0, fmt.Errorf("time %q: %w", v, err)
	}
	return t.UnixMicro(), nil
}

// parseDur parses a Go duration with an optional leading day count
// ("1d", "+1d2h", "-90m", "1us") into microseconds.
func parseDur(v string) (int64, error) {
	sign := int64(1)
	switch {
	case strings.HasPrefix(v, "+"):
		v = v[1:]
	case strings.HasPrefix(v, "-"):
		sign, v = -1, v[1:]
	}
	var days int64
	if i := strings.IndexByte(v, 'd'); i >= 0 {
		n, err := strconv.ParseInt(v[:i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", v, err)
		}
		days, v = n, v[i+1:]
	}
	var d time.Duration
	if v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("duration %q: %w", v, err)
		}
	}
	return sign * (days*86400e6 + d.Microseconds()), nil
}

func parseGoldenInput(lines []string) (*goldenParams, []testutil.Ev, error) {
	var p *goldenParams
	var evs []testutil.Ev
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Fields(l)
		if p == nil {
			p = &goldenParams{kind: f[0], kv: map[string]string{}, loc: time.UTC}
			for _, kv := range f[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, nil, fmt.Errorf("query parameter %q is not key=value", kv)
				}
				p.kv[k] = v
			}
			if tz, ok := p.kv["tz"]; ok {
				loc, err := time.LoadLocation(tz)
				if err != nil {
					return nil, nil, fmt.Errorf("tz: %w", err)
				}
				p.loc = loc
			}
			if b, ok := p.kv["base"]; ok {
				t, err := time.Parse(time.RFC3339Nano, b)
				if err != nil {
					return nil, nil, fmt.Errorf("base: %w", err)
				}
				p.base, p.has = t.UnixMicro(), true
			}
			continue
		}
		if len(f) < 3 {
			return nil, nil, fmt.Errorf("event line %q: want USER TIME NAME [PROP=VALUE ...]", l)
		}
		ts, err := p.parseTime(f[1])
		if err != nil {
			return nil, nil, err
		}
		ev := testutil.Ev{User: f[0], Time: ts, Name: f[2]}
		for _, kv := range f[3:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, nil, fmt.Errorf("event property %q is not key=value", kv)
			}
			if ev.Props == nil {
				ev.Props = map[string]event.Value{}
			}
			ev.Props[k] = event.String(v)
		}
		evs = append(evs, ev)
	}
	if p == nil {
		return nil, nil, fmt.Errorf("no query line")
	}
	return p, evs, nil
}

// runGolden runs one case through the kernels and the naive reference and
// renders both.
func runGolden(t *testing.T, input []string) (kernel, naive string, err error) {
	p, evs, err := parseGoldenInput(input)
	if err != nil {
		return "", "", err
	}
	rc := renderCtx{base: p.base, hasBase: p.has, loc: p.loc}
	from, err := p.time("from")
	if err != nil {
		return "", "", err
	}
	to, err := p.time("to")
	if err != nil {
		return "", "", err
	}
	ws, err := timebucket.ParseWeekStart(p.str("week_start", ""))
	if err != nil {
		return "", "", err
	}
	switch p.kind {
	case "funnel":
		w, err := parseDur(p.str("window", "14d"))
		if err != nil {
			return "", "", err
		}
		q := testutil.FunnelQuery{Steps: strings.Split(p.str("steps", ""), ","), Window: w, From: from, To: to}
		kr, kp := runFunnel(t, evs, q, nil)
		nr, np := testutil.NaiveFunnel(testutil.Data{Events: evs}, q)
		return rc.funnel(kr, kp), rc.funnel(nr, np), nil
	case "funnel_modes":
		q, bins, err := p.funnelModes(from, to, ws)
		if err != nil {
			return "", "", err
		}
		data := testutil.Data{Events: evs}
		c := buildModeCase(t, data, q, bins)
		res, outs := c.run(t, nil, 0, nil)
		// Chunks of one event give the same answer.
		if res1, outs1 := c.run(t, nil, 1, nil); !reflect.DeepEqual(res1, res) || !reflect.DeepEqual(outs1, outs) {
			return "", "", fmt.Errorf("chunked trails give another answer:\n%+v\n%+v", res1, res)
		}
		return rc.modes(q, outs, kernelTables(c, res)), rc.modes(q, testutil.NaiveFunnelOutcomes(data, q), naiveTables(data, q, bins)), nil
	case "trend":
		iv, err := timebucket.ParseInterval(p.str("interval", "day"))
		if err != nil {
			return "", "", err
		}
		q := testutil.TrendQuery{Bounds: timebucket.Bounds(from, to, iv, p.loc, ws), From: from, To: to}
		for _, s := range strings.Split(p.str("series", ""), ",") {
			ev, m, _ := strings.Cut(s, ":")
			math, err := analysis.ParseTrendMath(m)
			if err != nil {
				return "", "", err
			}
			q.Events = append(q.Events, ev)
			q.Math = append(q.Math, math)
		}
		kernel = rc.trend(q, trendRows(runTrend(t, evs, q, nil, feeder{})))
		if c := rc.trend(q, trendRows(runTrend(t, evs, q, nil, chunked(1, 1)))); c != kernel {
			return "", "", fmt.Errorf("the kernel fed chunks of tie groups says\n%s", c)
		}
		return kernel, rc.trend(q, testutil.NaiveTrend(testutil.Data{Events: evs}, q)), nil
	case "retention":
		q := testutil.RetentionQuery{Start: p.str("start", ""), Return: p.str("return", testutil.Any), WeekStart: ws, From: from, To: to,
			Common: testutil.Common{Loc: p.loc}}
		if q.Interval, err = timebucket.ParseInterval(p.str("interval", "day")); err != nil {
			return "", "", err
		}
		if q.Periods, err = strconv.Atoi(p.str("periods", "3")); err != nil {
			return "", "", err
		}
		if q.Type, err = analysis.ParseRetentionType(p.str("type", "")); err != nil {
			return "", "", err
		}
		if q.Windows, err = analysis.ParseRetentionWindows(p.str("windows", "")); err != nil {
			return "", "", err
		}
		if q.Criterion, err = analysis.ParseRetentionCriterion(p.str("criterion", "")); err != nil {
			return "", "", err
		}
		kernel = rc.retention(runRetention(t, evs, q, q.Periods, nil, feeder{}))
		if c := rc.retention(runRetention(t, evs, q, q.Periods, nil, chunked(1, 1))); c != kernel {
			return "", "", fmt.Errorf("the kernel fed chunks of tie groups says\n%s", c)
		}
		return kernel, rc.retention(testutil.NaiveRetention(testutil.Data{Events: evs}, q)[0].Cohorts), nil
	}
	return "", "", fmt.Errorf("unknown query kind %q", p.kind)
}

// funnelModes reads a funnel_modes query line.
func (p *goldenParams) funnelModes(from, to int64, ws timebucket.WeekStart) (testutil.FunnelQuery, int, error) {
	w, err := parseDur(p.str("window", "14d"))
	if err != nil {
		return testutil.FunnelQuery{}, 0, err
	}
	q := testutil.FunnelQuery{Steps: strings.Split(p.str("steps", ""), ","), Window: w, From: from, To: to,
		Order: p.str("order", ""), View: p.str("view", ""), Common: testutil.Common{Loc: p.loc}}
	if x := p.str("excl", ""); x != "" {
		for _, e := range strings.Split(x, ",") {
			ev, rng, _ := strings.Cut(e, ":")
			a, b, _ := strings.Cut(rng, "-")
			ex := testutil.Exclusion{Event: ev}
			if ex.From, err = strconv.Atoi(a); err != nil {
				return q, 0, fmt.Errorf("excl %q: %w", e, err)
			}
			if ex.To, err = strconv.Atoi(b); err != nil {
				return q, 0, fmt.Errorf("excl %q: %w", e, err)
			}
			q.Exclusions = append(q.Exclusions, ex)
		}
	}
	ints := map[string]*int{"from_step": &q.FromStep, "to_step": &q.ToStep}
	bins := 0
	ints["bins"] = &bins
	for k, ptr := range ints {
		if v, ok := p.kv[k]; ok {
			if *ptr, err = strconv.Atoi(v); err != nil {
				return q, 0, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	if q.View == "trends" {
		iv, err := timebucket.ParseInterval(p.str("interval", "day"))
		if err != nil {
			return q, 0, err
		}
		q.Bounds = timebucket.Bounds(from, to, iv, p.loc, ws)
	}
	if b := p.str("breakdown", ""); b != "" {
		q.Breakdown = &testutil.Breakdown{Prop: b}
		a := p.str("attribution", "")
		if k, ok := strings.CutPrefix(a, "step:"); ok {
			a = "step"
			if q.AttrStep, err = strconv.Atoi(k); err != nil {
				return q, 0, fmt.Errorf("attribution: %w", err)
			}
		}
		q.Attribution = a
	}
	return q, bins, nil
}
