package analysis_test

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "time/tzdata" // hermetic zone data when the host has none

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
//	trend base=T tz=Z interval=day week_start=monday series=a:count,$any:users from=T to=T
//	retention base=T tz=Z interval=day periods=3 start=a return=b type=first_time windows=calendar criterion=on from=T to=T
//	USER TIME NAME
//
// Times are RFC 3339 (with optional fraction) or offsets from base such as
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
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("event line %q: want USER TIME NAME", l)
		}
		ts, err := p.parseTime(f[1])
		if err != nil {
			return nil, nil, err
		}
		evs = append(evs, testutil.Ev{User: f[0], Time: ts, Name: f[2]})
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
