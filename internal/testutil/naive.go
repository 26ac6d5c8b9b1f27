package testutil

import (
	"slices"
	"sort"
	"time"

	"github.com/spurdb/spur/query/analysis"
	"github.com/spurdb/spur/query/timebucket"
)

// TrendQuery is a trend for NaiveTrend: one series per matcher.
type TrendQuery struct {
	Events []string             // matcher of series i (see Match)
	Math   []analysis.TrendMath // math of series i
	Bounds []int64              // bucket boundaries, UTC µs
	From   int64                // range [From, To), UTC µs
	To     int64
}

// NaiveTrend computes a trend by looking at every (series, bucket, event)
// triple: an event counts in bucket b when it matches, lies in [From, To)
// and in [Bounds[b], Bounds[b+1]). Users are counted with sets.
func NaiveTrend(evs []Ev, q TrendQuery) analysis.TrendResult {
	var res analysis.TrendResult
	for s, matcher := range q.Events {
		var sr analysis.TrendSeriesResult
		all := map[string]bool{}
		for b := 0; b+1 < len(q.Bounds); b++ {
			users := map[string]bool{}
			var count int64
			for _, e := range evs {
				if Match(matcher, e.Name) && e.Time >= q.From && e.Time < q.To &&
					e.Time >= q.Bounds[b] && e.Time < q.Bounds[b+1] {
					count++
					users[e.User] = true
					all[e.User] = true
				}
			}
			if q.Math[s] == analysis.MathUsers {
				count = int64(len(users))
			}
			sr.Buckets = append(sr.Buckets, count)
			sr.Total += count
		}
		if q.Math[s] == analysis.MathUsers {
			sr.Total = int64(len(all))
		}
		res.Series = append(res.Series, sr)
	}
	return res
}

// FunnelQuery is an ordered funnel for NaiveFunnel.
type FunnelQuery struct {
	Steps  []string // matcher of step k at index k-1 (see Match)
	Window int64    // µs, inclusive
	From   int64    // step 1 only in [From, To), UTC µs
	To     int64
}

// NaivePath is one user's outcome in NaiveFunnel.
type NaivePath struct {
	Step  int     // furthest step reached
	Times []int64 // step times of the counted attempt
	First int     // position in the input slice of the counted attempt's step-1 event
}

type naiveAttempt struct {
	entry  int64
	times  []int64 // times[k-1]: when step k was reached
	events []int   // positions in the input slice of the step events
}

// NaiveFunnel computes an ordered funnel following spec §5 word by word,
// with an explicit list of attempts. It returns the step table and every
// user's outcome (users with step 0 included).
func NaiveFunnel(evs []Ev, q FunnelQuery) (analysis.FunnelResult, map[string]NaivePath) {
	paths := map[string]NaivePath{}
	for _, user := range byUser(evs) {
		paths[evs[user[0]].User] = naiveFunnelUser(evs, user, q)
	}
	var res analysis.FunnelResult
	for k := 1; k <= len(q.Steps); k++ {
		r := analysis.FunnelStepResult{Step: k}
		var durs []int64
		for _, p := range paths {
			if p.Step >= k {
				r.Users++
				if k >= 2 {
					durs = append(durs, p.Times[k-1]-p.Times[k-2])
				}
			}
		}
		if len(durs) > 0 {
			var sum int64
			for _, d := range durs {
				sum += d
			}
			slices.Sort(durs)
			r.HasTime = true
			r.AvgSeconds = float64(sum) / float64(len(durs)) / 1e6
			r.MedianSeconds = naiveMedian(durs) / 1e6
		}
		res.Steps = append(res.Steps, r)
	}
	for k := range res.Steps {
		r := &res.Steps[k]
		if res.Steps[0].Users > 0 {
			r.Conversion = float64(r.Users) / float64(res.Steps[0].Users)
		}
		r.ConversionFromPrevious = r.Conversion
		if k > 0 && res.Steps[k-1].Users > 0 {
			r.ConversionFromPrevious = float64(r.Users) / float64(res.Steps[k-1].Users)
		}
	}
	return res, paths
}

func naiveMedian(sorted []int64) float64 {
	h := float64(len(sorted)-1) * 0.5
	lo := int(h)
	v := float64(sorted[lo])
	if h > float64(lo) {
		v += (h - float64(lo)) * (float64(sorted[lo+1]) - v)
	}
	return v
}

// naiveFunnelUser runs the funnel over one user's events; user lists
// positions in evs in trail order.
func naiveFunnelUser(evs []Ev, user []int, q FunnelQuery) NaivePath {
	// The steps each event matches; step 1 only inside [From, To).
	steps := map[int][]int{}
	for _, i := range user {
		e := evs[i]
		for k := 1; k <= len(q.Steps); k++ {
			if Match(q.Steps[k-1], e.Name) && (k > 1 || (e.Time >= q.From && e.Time < q.To)) {
				steps[i] = append(steps[i], k)
			}
		}
	}
	var attempts []*naiveAttempt
	var best NaivePath
	process := func(i, k int) {
		t := evs[i].Time
		if k == 1 {
			for _, a := range attempts {
				if a.entry == t {
					return // an attempt entered at this instant already exists
				}
			}
			attempts = append(attempts, &naiveAttempt{entry: t, times: []int64{t}, events: []int{i}})
			if best.Step == 0 {
				best = NaivePath{Step: 1, Times: []int64{t}, First: i}
			}
			return
		}
		// The attempt with the latest entry time among those at step k-1.
		var chosen *naiveAttempt
		for _, a := range attempts {
			if len(a.times) >= k-1 && (chosen == nil || a.entry > chosen.entry) {
				chosen = a
			}
		}
		if chosen == nil || t-chosen.entry > q.Window || slices.Contains(chosen.events, i) {
			return
		}
		for _, a := range attempts {
			if len(a.times) >= k && a.entry >= chosen.entry {
				return // an attempt with the same or a later entry is already at step k
			}
		}
		chosen.times = append(chosen.times, t)
		chosen.events = append(chosen.events, i)
		if k > best.Step {
			best = NaivePath{Step: k, Times: slices.Clone(chosen.times), First: chosen.events[0]}
		}
	}
	for i := 0; i < len(user); {
		j := i
		for j < len(user) && evs[user[j]].Time == evs[user[i]].Time {
			j++
		}
		var group []int // the group's events that match some step
		for _, e := range user[i:j] {
			if len(steps[e]) > 0 {
				group = append(group, e)
			}
		}
		same := true
		for _, e := range group {
			same = same && slices.Equal(steps[e], steps[group[0]])
		}
		if same {
			for _, e := range group {
				for x := len(steps[e]) - 1; x >= 0; x-- {
					process(e, steps[e][x])
				}
			}
		} else {
			for k := 1; k <= len(q.Steps); k++ {
				for _, e := range group {
					if slices.Contains(steps[e], k) {
						process(e, k)
					}
				}
			}
		}
		i = j
	}
	return best
}

// RetentionQuery is a retention analysis for NaiveRetention.
type RetentionQuery struct {
	Start, Return string // matchers A and B (see Match)
	Interval      timebucket.Interval
	Loc           *time.Location
	WeekStart     timebucket.WeekStart
	Periods       int
	Type          analysis.RetentionType
	Windows       analysis.RetentionWindows
	Criterion     analysis.RetentionCriterion
	From, To      int64 // cohort entry range, UTC µs
}

// NaiveRetention computes a retention table following spec §6 literally:
// for every cohort entry it computes the period index of every return
// event at t ≥ s (calendar indices by stepping through the calendar from
// the start's bucket) and then checks each period k.
func NaiveRetention(evs []Ev, q RetentionQuery) analysis.RetentionResult {
	floor := func(t int64) int64 { return timebucket.Floor(t, q.Interval, q.Loc, q.WeekStart) }
	next := func(t int64) int64 { return timebucket.Next(t, q.Interval, q.Loc, q.WeekStart) }
	cohorts := timebucket.Bounds(q.From, q.To, q.Interval, q.Loc, q.WeekStart)
	cohorts = cohorts[:len(cohorts)-1]
	var res analysis.RetentionResult
	for _, start := range cohorts {
		res.Cohorts = append(res.Cohorts, analysis.RetentionCohort{Start: start, Retained: make([]int64, q.Periods)})
	}
	index := func(s, t int64) int {
		if q.Windows == analysis.WindowsRolling {
			return int((t - s) / q.Interval.Rolling())
		}
		k := 0 // boundaries in (floor(s), t], counted up to Periods+1
		for b := next(floor(s)); b <= t && k <= q.Periods; b = next(b) {
			k++
		}
		return k
	}
	for _, positions := range byUser(evs) {
		var user []Ev
		for _, i := range positions {
			user = append(user, evs[i])
		}
		var starts []int64
		seenBucket := map[int64]bool{}
		for _, e := range user {
			if !Match(q.Start, e.Name) {
				continue
			}
			if q.Type == analysis.TypeFirstTime {
				if e.Time >= q.From && e.Time < q.To {
					starts = append(starts, e.Time)
				}
				break // only the earliest start event counts
			}
			if e.Time >= q.From && e.Time < q.To && !seenBucket[floor(e.Time)] {
				seenBucket[floor(e.Time)] = true
				starts = append(starts, e.Time)
			}
		}
		for _, s := range starts {
			c := sort.Search(len(cohorts), func(i int) bool { return cohorts[i] > s }) - 1
			row := &res.Cohorts[c]
			row.Size++
			row.Retained[0]++
			var idxs []int // period index of every return event at t ≥ s
			for _, e := range user {
				if Match(q.Return, e.Name) && e.Time >= s {
					idxs = append(idxs, index(s, e.Time))
				}
			}
			for k := 1; k < q.Periods; k++ {
				for _, idx := range idxs {
					if idx == k || (q.Criterion == analysis.CriterionOnOrAfter && idx > k) {
						row.Retained[k]++
						break
					}
				}
			}
		}
	}
	return res
}
