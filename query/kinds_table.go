package query

import (
	"fmt"
	"io"
	"strings"
)

// seriesName is a series' column title: label, then breakdown value.
func seriesName(label string, value *string) string {
	if value != nil {
		return label + " / " + *value
	}
	return label
}

// writeTable prints one row per number of active buckets and one
// column per series (and breakdown value).
func (r *StickinessResult) writeTable(w io.Writer) {
	how := "users active in exactly n"
	if r.Cumulative {
		how = "users active in at least n"
	}
	fmt.Fprintf(w, "stickiness %s .. %s (%s): %s %ss\n", r.Range.From, r.Range.To, r.TZ, how, r.Interval)
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "%ss\t", r.Interval)
	for _, s := range r.Series {
		fmt.Fprintf(&hdr, "%s\t", seriesName(s.Label, s.BreakdownValue))
	}
	fmt.Fprintln(w, hdr.String())
	if len(r.Series) > 0 {
		for i := range r.Series[0].Counts {
			fmt.Fprintf(w, "%d\t", i+1)
			for _, s := range r.Series {
				fmt.Fprintf(w, "%d\t", s.Counts[i])
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprint(w, "users\t")
	for _, s := range r.Series {
		fmt.Fprintf(w, "%d\t", s.Users)
	}
	fmt.Fprintln(w)
	if l := r.List; l != nil {
		n := "exactly"
		if r.Cumulative {
			n = "at least"
		}
		writeList(w, fmt.Sprintf("users of series %d active in %s %d %ss", l.Series, n, l.Intervals, r.Interval), l)
	}
}

// writeTable prints one row per bucket (then per breakdown value).
func (r *LifecycleResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "lifecycle by %s %s .. %s (%s); * = incomplete\n", r.Interval, r.Range.From, r.Range.To, r.TZ)
	rows := func(bs []LifecycleBucket) {
		fmt.Fprintln(w, "bucket\tnew\treturning\tresurrecting\tdormant\t")
		for _, b := range bs {
			mark := ""
			if b.Incomplete {
				mark = "*"
			}
			fmt.Fprintf(w, "%s%s\t%d\t%d\t%d\t%d\t\n", label(b.Start), mark, b.New, b.Returning, b.Resurrecting, b.Dormant)
		}
	}
	rows(r.Buckets)
	for _, b := range r.Breakdown {
		fmt.Fprintf(w, "breakdown %s\n", b.Value)
		rows(b.Buckets)
	}
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("%s users in the %s of %s", l.Status, r.Interval, l.Bucket), l)
	}
}

// writeTable prints one row per edge.
func (r *PathsResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "paths %s .. %s (%s): %d edges\n", r.Range.From, r.Range.To, r.TZ, len(r.Edges))
	fmt.Fprintln(w, "source\ttarget\tsessions\tusers\tavg time\t")
	for _, e := range r.Edges {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t\n", e.Source, e.Target, e.Sessions, e.Users, dur(&e.AvgSeconds))
	}
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("users of the edge %s → %s", l.Source, l.Target), l)
	}
}

// writeTable prints one row per channel (and breakdown value), the
// totals, and with an interval the conversions per bucket.
func (r *AttributionResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "attribution %s .. %s (%s), model %s\n", r.Range.From, r.Range.To, r.TZ, r.Model)
	sub := r.Total.Subsequent != nil
	hdr := "channel\tconversions\tusers\tvalue\t"
	if sub {
		hdr += "subsequent\tsubsequent value\t"
	}
	fmt.Fprintln(w, hdr)
	for _, c := range r.Channels {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t", seriesName(c.Channel, c.BreakdownValue), num(c.Conversions), c.Users, num(c.Value))
		if c.Subsequent != nil {
			fmt.Fprintf(w, "%s\t%s\t", num(c.Subsequent.Events), num(c.Subsequent.Value))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "total\t%d\t%d\t%s\t", r.Total.Conversions, r.Total.Users, num(r.Total.Value))
	if sub {
		fmt.Fprintf(w, "%d\t%s\t", r.Total.Subsequent.Events, num(r.Total.Subsequent.Value))
	}
	fmt.Fprintln(w)
	if r.Interval != "" && len(r.Channels) > 0 {
		fmt.Fprintf(w, "conversions by %s; * = incomplete\n", r.Interval)
		var h strings.Builder
		h.WriteString("bucket\t")
		for _, c := range r.Channels {
			fmt.Fprintf(&h, "%s\t", seriesName(c.Channel, c.BreakdownValue))
		}
		fmt.Fprintln(w, h.String())
		for b, bk := range r.Channels[0].Buckets {
			mark := ""
			if bk.Incomplete {
				mark = "*"
			}
			fmt.Fprintf(w, "%s%s\t", label(bk.Start), mark)
			for _, c := range r.Channels {
				fmt.Fprintf(w, "%s\t", num(c.Buckets[b].Conversions))
			}
			fmt.Fprintln(w)
		}
	}
	if l := r.List; l != nil {
		writeList(w, fmt.Sprintf("users credited in channel %s", *l.Channel), l)
	}
}
